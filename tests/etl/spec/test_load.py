"""The flights spec loads, keeps leakage out, and a broken spec names the field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from etl.spec import SPECS_DIR, SpecError, load_spec

LEAKAGE = {"dep_time", "dep_delay", "arr_time", "air_time", "arr_delay"}


def test_flights_spec_shape() -> None:
    spec = load_spec("flights")
    assert spec.name == "flights"
    assert spec.key == ("time_hour", "carrier", "flight", "origin")
    assert spec.label.name == "late" and spec.label.source == "arr_delay"
    assert (spec.label.op, spec.label.value) == ("gt", 15.0)
    assert dict(spec.split.fractions) == {"train": 0.8, "eval": 0.1, "test": 0.1}
    assert spec.shard_target_bytes == 128 * 1024 * 1024 and spec.compression is None
    assert spec.expectations == SPECS_DIR / "flights" / "expectations.json"
    types = spec.column_types()
    assert types["time_hour"] == "timestamp" and types["plane_year"] == "int64"
    assert {"temp", "visib", "plane_type", "plane_seats"} <= set(types)


def test_leakage_columns_never_features() -> None:
    spec = load_spec("flights")
    assert LEAKAGE <= set(spec.exclude)
    used = {f.name for f in spec.features} | {c for f in spec.features for c in f.inputs}
    assert not used & LEAKAGE
    schema = spec.manifest_schema()
    assert not set(schema["features"]) & LEAKAGE
    assert schema["label"] == {"name": "late", "dtype": "int64", "classes": 2, "task": "binary"}


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load((SPECS_DIR / "flights" / "spec.yaml").read_text())
    mutate(raw)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["features"].append({"name": "dep_delay", "kind": "numeric"}),
     "features[21]: uses excluded (leakage) column 'dep_delay'"),
    (lambda r: r["features"].append(
        {"name": "x", "kind": "numeric", "derive": {"op": "subtract",
                                                     "columns": ["arr_delay", "distance"]}}),
     "uses excluded (leakage) column 'arr_delay'"),
    (lambda r: r["sources"]["flights"].update(format="xlsx"), "sources.flights.format: expected"),
    (lambda r: r["sources"]["flights"]["columns"].update(distance="decimal"),
     "sources.flights.columns.distance"),
    (lambda r: r["split"].update(fractions={"train": 0.8, "eval": 0.3}), "must sum to 1"),
    (lambda r: r.update(key=["time_hour", "nope"]), ".key: expected columns"),
    (lambda r: r["joins"][1].update(prefix=""), "collides with an existing column"),
    (lambda r: r["joins"][0].update(keys=["origin", "hour"]), "joins[0].keys: 'hour'"),
    (lambda r: r["label"].update(op="between"), "label.op: expected one of"),
    (lambda r: r["label"].pop("source"), "label.source: required field is missing"),
    (lambda r: r["shards"].update(target_bytes=0), "shards.target_bytes"),
    (lambda r: r["shards"].update(compression="zstd"), "shards.compression"),
    (lambda r: r["sources"]["flights"].update(uri="../../etc/flights.csv"), "no '..'"),
    (lambda r: r["sources"]["flights"].update(uri="raw/flights/flights.csv"),
     "needs {date} in its uri"),
    (lambda r: r["features"][0].update(fill=[1]), "features[0].fill"),
    (lambda r: r["features"][4].update(dtype="string"), "features[4].dtype"),
    (lambda r: r["sources"]["flights"]["read"].update(sep=";"), "sources.flights.read"),
    (lambda r: r.update(join=r.pop("joins")), ".join: unknown field"),
    (lambda r: r["features"][2].update(fil=0), "features[2].fil: unknown field"),
    (lambda r: r["shards"].update(target_mb=64), "shards.target_mb: unknown field"),
    (lambda r: r["shards"].update(min_train_shards=0), "shards.min_train_shards: expected"),
    (lambda r: r["features"][4].update(dtype="int64"), "features[4].fill: 'mean' needs dtype"),
])
def test_bad_spec_names_the_field(tmp_path: Path, mutate, message: str) -> None:
    path = _write(tmp_path, mutate)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_spec_name_cannot_be_a_path() -> None:
    with pytest.raises(SpecError, match="dataset name"):
        load_spec("../flights")
