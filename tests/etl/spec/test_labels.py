"""Label tasks on the ETL side, on the real wine and diabetes tables scikit-learn ships.

The spec declares the task; a bad label fails the load naming the file and field; the
transform encodes classes by index (listed or from all splits), refuses a class value
outside them by name, and keeps a regression label's statistics mergeable.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from etl import statistics
from etl.errors import ValidationFailed
from etl.kinds.tabular import prepare as transform
from etl.kinds.tabular.land import sklearn_frame
from etl.spec import SPECS_DIR, SpecError, load_spec
from etl.write.writer import SPLIT_COL


def _spec_copy(tmp_path: Path, name: str, mutate) -> Path:
    raw = yaml.safe_load((SPECS_DIR / name / "spec.yaml").read_text())
    mutate(raw["label"])
    shutil.copy(SPECS_DIR / name / "expectations.json", tmp_path / "expectations.json")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_example_specs_declare_their_tasks() -> None:
    wine, diabetes, flights = load_spec("wine"), load_spec("diabetes"), load_spec("flights")
    assert (wine.label.task, wine.label.names) == ("multiclass", ("class_0", "class_1", "class_2"))
    assert wine.manifest_schema()["label"] == {
        "name": "cultivar", "dtype": "int64", "task": "multiclass", "classes": 3,
        "names": ["class_0", "class_1", "class_2"]}
    assert diabetes.manifest_schema()["label"] == {
        "name": "progression", "dtype": "float32", "task": "regression", "transform": "log1p"}
    assert flights.label.task == "binary" and flights.label.op == "gt"
    assert wine.upstream["from"] == diabetes.upstream["from"] == "sklearn"


@pytest.mark.parametrize("name, mutate, message", [
    ("diabetes", lambda label: label.update(task="ordinal"), "label.task: expected one of"),
    ("diabetes", lambda label: label.update(source="hba1c"),
     "label.source: 'hba1c' is not an extracted column"),
    ("wine", lambda label: (label.update(task="regression"), label.pop("classes")),
     "must be numeric (int64/float64) for a regression label, is string"),
    ("wine", lambda label: (label.update(task="binary", positive=[]), label.pop("classes")),
     "label.positive: expected the positive class's value"),
    ("wine", lambda label: (label.update(task="binary", positive=1.5), label.pop("classes")),
     "label.positive: expected the positive class's value"),
    ("diabetes", lambda label: (label.update(task="binary", positive=1, op="gt"),
                                label.pop("transform")), "label.op: unknown field"),
    ("wine", lambda label: label.update(classes=["class_0", "class_0"]), "label.classes"),
    ("diabetes", lambda label: label.update(op="gt"), "label.op: unknown field"),
    ("diabetes", lambda label: label.update(transform="sqrt"), "label.transform: expected"),
    ("wine", lambda label: label.pop("task"), "label.classes: unknown field"),
])
def test_bad_label_names_file_and_field(tmp_path: Path, name: str, mutate, message: str) -> None:
    path = _spec_copy(tmp_path, name, mutate)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert message in str(info.value) and str(path) in str(info.value)


def _prepared(spec_path: str | Path, name: str) -> tuple[pd.DataFrame, object]:
    spec = load_spec(spec_path)
    frame = sklearn_frame(load_spec(name)).astype("str")  # extracted CSV values are strings
    return transform.prepare_rows(frame, spec), spec


def test_multiclass_labels_are_class_indices_in_the_listed_order() -> None:
    prepared, spec = _prepared("wine", "wine")
    stats = transform.finalize_partial(transform.split_partial(prepared, spec), spec)
    assert stats["label_schema"]["names"] == ["class_0", "class_1", "class_2"]
    final = transform.finalize_rows(prepared, spec, stats["label_schema"])
    truth = sklearn_frame(load_spec("wine"))["cultivar"].map(
        {"class_0": 0, "class_1": 1, "class_2": 2})
    assert final["cultivar"].dtype == np.int64 and (final["cultivar"] == truth).all()
    train = final[final[SPLIT_COL] == "train"]["cultivar"].value_counts()
    assert stats["label_counts"] == {str(i): int(train[i]) for i in range(3)}


def test_classes_not_listed_come_from_every_split(tmp_path: Path) -> None:
    path = _spec_copy(tmp_path, "wine", lambda label: label.pop("classes"))
    prepared, spec = _prepared(path, "wine")
    assert spec.label.names == ()
    stats = transform.finalize_partial(transform.split_partial(prepared, spec), spec)
    assert stats["label_schema"]["names"] == ["class_0", "class_1", "class_2"]
    assert stats["label_schema"]["classes"] == 3


def test_a_class_outside_the_spec_fails_naming_the_value(tmp_path: Path) -> None:
    path = _spec_copy(tmp_path, "wine", lambda label: label.update(classes=["class_0", "class_1"]))
    prepared, spec = _prepared(path, "wine")
    with pytest.raises(ValidationFailed) as info:
        transform.finalize_partial(transform.split_partial(prepared, spec), spec)
    text = str(info.value)
    assert "'class_2'" in text and "train: " in text and f"{path}.label.classes" in text
    assert info.value.summary == {"unknown_classes": ["class_2"]}


def test_regression_label_moments_merge_like_the_whole() -> None:
    prepared, spec = _prepared("diabetes", "diabetes")
    assert prepared["progression"].dtype == np.float64
    whole = transform.split_partial(prepared, spec)
    parts = [transform.split_partial(prepared.iloc[i::5], spec) for i in range(5)]
    merged = statistics.StatisticsPartial.merge_all(parts[::-1])
    train = prepared[prepared[SPLIT_COL] == "train"]["progression"].to_numpy()
    for partial in (whole, merged):
        label = transform.finalize_partial(partial, spec)["label"]
        assert label["count"] == len(train)
        assert label["mean"] == pytest.approx(train.mean(), rel=1e-12)
        assert label["var"] == pytest.approx(train.var(), rel=1e-9)
        assert (label["min"], label["max"]) == (train.min(), train.max())
    final = transform.finalize_rows(prepared, spec, spec.label.schema())
    assert final["progression"].dtype == np.float32


def _label(**fields):
    from etl.spec.model import Label

    return Label(name="y", source="s", **fields)


def test_a_class_seen_only_in_test_is_a_class() -> None:
    from etl.spec.labels import TASKS

    label = _label(task="multiclass", dtype="int64", classes=0)
    counts = {"train": {"a": 9, "b": 8}, "eval": {"a": 2}, "test": {"b": 1, "c": 1}}
    schema = TASKS["multiclass"].resolve(label, counts, "spec.yaml")
    assert schema["names"] == ["a", "b", "c"] and schema["classes"] == 3


def test_whole_number_floats_are_classes_and_so_are_fractions() -> None:
    from etl.spec.labels import TASKS

    label = _label(task="multiclass")
    encode = TASKS["multiclass"].encode
    assert list(encode(label, pd.Series([1.0, 3.0, 2.0]), "float64")) == ["1", "3", "2"]
    # a few settings of a measured value (nlme's Wafer voltage: 0.8, 1.2, 1.6, 2.0, 2.4)
    assert list(encode(label, pd.Series([0.8, 1.2, 2.0, 0.1 + 0.2, float("inf")]), "float64")) \
        == ["0.8", "1.2", "2", "0.30000000000000004", "inf"]


@pytest.mark.parametrize("positive, values, expected", [
    (("yes",), ["yes", "no", "Yes"], [1, 0, 0]),  # a string matches exactly
    ((True,), ["Yes", "no", "TRUE", "N"], [1, 0, 1, 0]),  # YAML's unquoted yes: its spellings
    ((1,), [1, 2, 1], [1, 0, 1]),
    (("a", "b"), ["a", "b", "c", "d"], [1, 1, 0, 0]),  # one-vs-rest
])
def test_positive_names_class_one(positive, values, expected) -> None:
    from etl.spec.labels import TASKS

    kind = "int64" if isinstance(values[0], int) else "string"
    got = TASKS["binary"].encode(_label(positive=positive), pd.Series(values), kind)
    assert list(got) == expected


def test_a_positive_that_matches_no_train_row_fails_naming_it() -> None:
    from etl.spec.labels import TASKS

    label = _label(positive=("Yes",))
    with pytest.raises(ValidationFailed, match=r"positive \['Yes'\] matches no row.*name a "
                       r"value the column holds"):
        TASKS["binary"].resolve(label, {"train": {"0": 40}, "test": {"0": 5}}, "spec.yaml")
    # the class is there, too rare to reach train (a drawn table's 1 positive of 165 rows):
    # naming another value would not help
    with pytest.raises(ValidationFailed, match=r"matches no row of the train split \(98 rows\); "
                       r"it holds 1 row\(s\) of eval and test only: too few to learn from"):
        TASKS["binary"].resolve(label, {"train": {"0": 98}, "eval": {"0": 33},
                                        "test": {"0": 33, "1": 1}}, "spec.yaml")
    schema = TASKS["binary"].resolve(label, {"train": {"0": 30, "1": 10}}, "spec.yaml")
    assert schema["positive"] == ["Yes"] and schema["task"] == "binary"


def test_a_positive_label_loads_from_a_spec(tmp_path: Path) -> None:
    path = _spec_copy(tmp_path, "wine", lambda label: (
        label.update(task="binary", positive=["class_0", "class_2"]), label.pop("classes")))
    spec = load_spec(path)
    assert spec.label.positive == ("class_0", "class_2") and spec.label.op is None
    prepared, spec = _prepared(path, "wine")
    assert set(prepared[spec.label.name]) == {0, 1}
