"""``etl spec init`` drafts a spec from real raw data; ``etl spec check`` accepts it and names the
field of every broken one; the drafted spec runs through the ETL without edits but the label."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
import yaml

from etl import pipeline, versions
from etl.__main__ import main
from etl.authoring.check import check_spec
from etl.authoring.columns import ColumnProfile, column_profiles, null_tokens
from etl.authoring.profile import Origin, profile_frame
from etl.authoring.suite import widen
from etl.kinds import land
from etl.kinds.landing import LandOptions
from etl.spec.scheduling import DEFAULT_SPECS_DIR


def profile_column(name: str, values: pd.Series) -> ColumnProfile:
    """One column of text values profiled on its own, as ``spec init`` profiles a table."""
    frame = pd.DataFrame({name: values.astype("string[pyarrow]")})
    table = profile_frame(frame, Origin.one("", len(frame)), seed=0)
    return column_profiles(table, {name: name}, null_tokens(table))[name]


@pytest.fixture
def specs(tmp_path: Path, monkeypatch) -> Path:
    """A spec folder outside the repo, first on the search path (the examples stay visible)."""
    folder = tmp_path / "specs"
    folder.mkdir()
    monkeypatch.setenv("PIPELINE_SPECS_PATH", os.pathsep.join([str(folder), str(DEFAULT_SPECS_DIR)]))
    return folder


def _sklearn_csv(tmp_path: Path, loader: str, fmt: str = "csv") -> Path:
    """A scikit-learn bundled dataset (real data, shipped offline) written as a raw file."""
    import sklearn.datasets

    frame = getattr(sklearn.datasets, loader)(as_frame=True).frame
    path = tmp_path / "raw" / f"{loader}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)
    return path


def _init(capsys, *args: str) -> str:
    assert main(["spec", "init", *args]) == 0
    return capsys.readouterr().out


def test_profile_types_key_and_margins() -> None:
    s = pd.Series
    assert profile_column("a", s(["1", "-2", None])).type == "int64"
    assert profile_column("a", s(["1.5", "2", None])).type == "float64"
    assert profile_column("a", s(["2013-01-01 05:00:00", "2013-01-02T06:00:00Z"])).type \
        == "timestamp"
    assert profile_column("a", s(["UA", "2013-01-01"])).type == "string"
    carrier, delay = profile_column("c", s(["UA", "AA", "UA"])), profile_column(
        "d", s(["1.5", "1.5", "3"]))
    assert carrier.values == ("AA", "UA") and delay.high == 3.0 and delay.distinct == 2
    assert widen(10, 20, 0.1, integer=True) == (9.0, 21.0)
    assert widen(0.5, 1.0, 0.1, integer=False) == (0.45, 1.05)
    assert widen(2013, 2013, 0.1, integer=True)[0] > 1800  # a constant keeps a sane range


def test_init_on_flights_raw_days_checks_and_runs_through_the_etl(tmp_path, specs, capsys):
    """Real flights raw files landed by ``etl land``; the only decision taken is the label."""
    root = f"file://{tmp_path / 'data'}"
    land(root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    out = _init(capsys, "--name", "flights_day", "--root", root, "--label", "arr_delay",
                "--task", "binary", "--source", "raw/flights/date={date}/flights.csv")
    assert "Still to decide:" in out and "label: the draft says arr_delay >" in out
    spec = yaml.safe_load((specs / "flights_day" / "spec.yaml").read_text())
    assert spec["label"]["source"] == "arr_delay" and spec["exclude"] == ["arr_delay"]
    source = spec["sources"]["flights_day"]
    assert source["columns"]["time_hour"] == "timestamp" and source["event_time"] == "time_hour"
    assert source["partitioning"] == {"placeholder": "date", "format": "%Y-%m-%d",
                                      "granularity": "day", "require_complete": True}
    assert {"name": "origin", "kind": "categorical", "fill": "UNKNOWN"} in spec["features"]
    suite = json.loads((specs / "flights_day" / "expectations.json").read_text())
    kinds = {(e["type"], e["kwargs"].get("column")) for e in suite["expectations"]}
    assert ("expect_column_values_to_be_in_set", "origin") in kinds
    assert ("expect_compound_columns_to_be_unique", None) in kinds
    assert main(["spec", "check", "flights_day"]) == 0, capsys.readouterr().out
    result = pipeline.run("flights_day", root, "2013-01-03", run_id="drafted")
    assert result.created and sum(result.splits.values()) > 1500  # both days
    manifest = versions.read_manifest(result.version_uri)
    assert manifest.schema.label.name == "label"


@pytest.mark.parametrize("name, label, task, key", [
    ("wine", "cultivar", "multiclass", "sample_id"),
    ("diabetes", "progression", "regression", "patient_id"),
])
def test_init_on_a_bundled_raw_file_checks_and_runs_through_the_etl(tmp_path, specs, capsys,
                                                                     name, label, task, key):
    """The raw file ``etl land`` writes for a shipped example; the only choice is the label."""
    root = f"file://{tmp_path / 'data'}"
    land(root, name)
    draft = f"{name}_from_raw"
    out = _init(capsys, "--name", draft, "--root", root, "--label", label, "--task", task,
                "--source", f"raw/{name}/{name}.csv")
    assert f"column {key!r} (a unique integer: an id) is not a feature" in out
    assert main(["spec", "check", draft]) == 0, capsys.readouterr().out
    spec = yaml.safe_load((specs / draft / "spec.yaml").read_text())
    assert spec["key"] == [key] and key not in {f["name"] for f in spec["features"]}
    suite = json.loads((specs / draft / "expectations.json").read_text())
    assert {"type": "expect_column_values_to_be_unique", "kwargs": {"column": key}} in [
        {"type": e["type"], "kwargs": e["kwargs"]} for e in suite["expectations"]]
    result = pipeline.run(draft, root, "2026-01-01", run_id="drafted")
    assert result.created and sum(result.splits.values()) == {"wine": 178,
                                                                     "diabetes": 442}[name]
    schema = versions.read_manifest(result.version_uri).schema
    assert schema.label.task == task and len(schema.features) == len(spec["features"])
    if task == "multiclass":
        assert schema.label.class_names == ["class_0", "class_1", "class_2"]


def test_init_on_an_image_folder_says_it_drafts_tabular_specs_only(tmp_path, specs, capsys):
    folder = tmp_path / "raw" / "digits" / "0"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(b"\x89PNG")
    assert main(["spec", "init", "--name", "digits_draft", "--source",
                 str(tmp_path / "raw" / "digits")]) == 1
    err = capsys.readouterr().err
    assert "cannot tell the format" in err and "kind: images" in err
    assert not (specs / "digits_draft").exists()


def test_init_reads_parquet_and_json_lines(tmp_path, specs, capsys) -> None:
    for fmt in ("parquet", "jsonl"):
        path = _sklearn_csv(tmp_path, "load_diabetes", fmt)
        _init(capsys, "--name", f"diabetes_{fmt}", "--source", str(path), "--label", "target")
        report = check_spec(f"diabetes_{fmt}")
        assert report.ok, report.problems
        spec = yaml.safe_load((specs / f"diabetes_{fmt}" / "spec.yaml").read_text())
        assert spec["sources"][f"diabetes_{fmt}"]["uri"] == f"file://{path}"
        assert spec["sources"][f"diabetes_{fmt}"]["columns"]["bmi"] == "float64"


def test_init_multiclass_label_and_a_header_that_is_no_identifier(tmp_path, specs, capsys):
    """The header is kept as the column's source, under an identifier every stage can use."""
    _init(capsys, "--name", "wine_draft", "--label", "target", "--task", "multiclass",
          "--source", str(_sklearn_csv(tmp_path, "load_wine")))
    spec = yaml.safe_load((specs / "wine_draft" / "spec.yaml").read_text())
    assert spec["label"] == {"name": "label", "source": "target", "task": "multiclass"}
    assert spec["sources"]["wine_draft"]["columns"]["od280_od315_of_diluted_wines"] == {
        "type": "float64", "source": "od280/od315_of_diluted_wines"}
    # 178 rows: 30 held-out rows each need more than 15%
    assert spec["split"]["fractions"] == {"train": 0.6, "eval": 0.2, "test": 0.2}


def test_init_refuses_a_binary_label_of_three_values_naming_both_ways_out(tmp_path, specs,
                                                                          capsys) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("id,colour,size\n1,red,2\n2,blue,3\n3,green,4\n4,red,5\n")
    assert main(["spec", "init", "--name", "t", "--source", str(csv), "--label", "colour",
                 "--task", "binary"]) == 1
    err = capsys.readouterr().err
    assert "'colour' holds 3 ('red', 'blue', 'green')" in err or "holds 3 (" in err, err
    for value in ("'red'", "'blue'", "'green'"):
        assert value in err
    assert "positive: [a, b]" in err and "--task multiclass" in err
    assert not (specs / "t").exists()


def _mutate_spec(change):
    def apply(folder: Path) -> None:
        path = folder / "spec.yaml"
        spec = yaml.safe_load(path.read_text())
        change(spec)
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return apply


def _mutate_suite(change):
    def apply(folder: Path) -> None:
        path = folder / "expectations.json"
        suite = json.loads(path.read_text())
        change(suite["expectations"])
        path.write_text(json.dumps(suite))
    return apply


BAD = {
    "label column missing": (_mutate_spec(lambda s: s["label"].update(source="nope")),
                             "spec.yaml.label.source: 'nope' is not an extracted column"),
    "unknown task": (_mutate_spec(lambda s: s["label"].update(task="ordinal")),
                     "spec.yaml.label.task"),
    "bad schedule": (_mutate_spec(lambda s: s.update(schedule="nightly")),
                     "spec.yaml.schedule: expected a cron"),
    "training typo": (_mutate_spec(lambda s: s.update(training={"epochz": 2})),
                      "spec.yaml.training.epochz: unknown training setting"),
    "name not its folder": (_mutate_spec(lambda s: s.update(name="other")),
                            "spec.yaml.name: 'other' must match its folder 'diabetes_draft'"),
    "suite file missing": (lambda f: (f / "expectations.json").unlink(),
                           "spec.yaml.expectations: expected a GX suite file"),
    "suite names an undeclared column": (
        _mutate_suite(lambda e: e[0]["kwargs"].update(column="nope")),
        ("expectations.json: expectation #0 (expect_column_values_to_be_in_type_list) names "
        "columns ['nope']")),
    "unknown expectation type": (
        _mutate_suite(lambda e: e[0].update(type="expect_magic")),
        "expectations.json: expectation #0: type 'expect_magic' is not a GX 1.x expectation"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_specs_fail_check_naming_file_and_field(tmp_path, specs, capsys, case) -> None:
    _init(capsys, "--name", "diabetes_draft", "--label", "target",
          "--source", str(_sklearn_csv(tmp_path, "load_diabetes")))
    assert check_spec("diabetes_draft").ok
    mutate, message = BAD[case]
    mutate(specs / "diabetes_draft")
    assert main(["spec", "check", "diabetes_draft"]) == 1
    out = capsys.readouterr().out
    assert f"error: {specs / 'diabetes_draft'}" in out and message in out, out


def test_without_a_label_the_draft_says_so_and_check_names_the_field(tmp_path, specs, capsys):
    out = _init(capsys, "--name", "diabetes_draft", "--source",
                str(_sklearn_csv(tmp_path, "load_diabetes")))
    assert "label: choose the column to predict" in out
    report = check_spec("diabetes_draft")
    missing = f"{specs / 'diabetes_draft' / 'spec.yaml'}.label: required field is missing"
    assert report.problems == [missing]


def test_a_repeated_id_column_is_drafted_as_group_by_commented_out(tmp_path, specs, capsys):
    """No unique key, and patient_id repeats over each patient's visits: the draft offers
    ``group_by: [patient_id]`` as a comment the user can switch on, and the switched-on spec
    (stratify dropped, as the comment says) passes check."""
    rows = ["patient_id,sex,dose,outcome"]
    for pid in range(30):  # two identical visits each: no column set is unique
        sex = "MF"[pid % 2]
        rows += [f"{pid},{sex},1,{pid % 3 == 0:d}"] * 2 + [f"{pid},{sex},{1 + pid % 4},1"]
    csv = tmp_path / "visits.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = _init(capsys, "--name", "visits", "--source", str(csv), "--label", "outcome")
    assert "split.group_by: drafted commented out as ['patient_id']" in out
    path = specs / "visits" / "spec.yaml"
    text = path.read_text()
    assert "  # group_by: [patient_id]  # uncomment, and drop stratify," in text
    spec = yaml.safe_load(text)
    assert spec["split"]["by"] == "row" and "group_by" not in spec["split"]
    assert "patient_id" not in {f["name"] for f in spec["features"]}  # an id: no signal
    assert "dose" in {f["name"] for f in spec["features"]}  # repeated, but not id-like
    assert check_spec("visits").ok
    path.write_text(text.replace("  # group_by: [patient_id]", "  group_by: [patient_id]")
                    .replace("  stratify: true\n", ""))
    report = check_spec("visits")
    assert report.ok, report.problems
    assert yaml.safe_load(path.read_text())["split"]["group_by"] == ["patient_id"]
