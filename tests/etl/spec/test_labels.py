"""Label tasks on the ETL side, on the real wine and diabetes tables scikit-learn ships.

The spec declares the task; a bad label fails the load naming the file and field; the
transform encodes classes by index (listed or from the train split), refuses a class value
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


def test_classes_not_listed_come_from_the_train_split(tmp_path: Path) -> None:
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
    merged = statistics.merge_all(parts[::-1])
    train = prepared[prepared[SPLIT_COL] == "train"]["progression"].to_numpy()
    for partial in (whole, merged):
        label = transform.finalize_partial(partial, spec)["label"]
        assert label["count"] == len(train)
        assert label["mean"] == pytest.approx(train.mean(), rel=1e-12)
        assert label["var"] == pytest.approx(train.var(), rel=1e-9)
        assert (label["min"], label["max"]) == (train.min(), train.max())
    final = transform.finalize_rows(prepared, spec, spec.label.schema())
    assert final["progression"].dtype == np.float32
