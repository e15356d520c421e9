"""etl.write.writer: the split on real public tables -- a keyless table splits by the spec's
fractions with every class in every split, a stratified split is the same on another machine
and whether the data is built day by day or at once -- and shard writing: one partition per
shard, deterministic bytes, parseable Examples."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.tables import TABLES, land_daily, land_table
from etl import pipeline, versions
from etl.__main__ import main
from etl.kinds.landing import LandOptions
from etl.kinds.tabular import prepare as transform
from etl.kinds.tabular import read as extract
from etl.kinds.tabular.land import land
from etl.kinds.tabular.prepare import prepare_rows
from etl.kinds.tabular.read import join_lookups, read_lookups, read_source_file
from etl.segments import plan
from etl.segments.compose import manifest_schema
from etl.spec import load_spec
from etl.write import readback, shards, writer

REPO = Path(__file__).resolve().parents[3]


def _draft(tmp_path: Path, table: str, source: str, root: str) -> Path:
    t = TABLES[table]
    out = tmp_path / "specs" / t.name
    assert main(["spec", "init", "--name", t.name, "--source", source, "--root", root,
                 "--label", t.label, "--task", t.task, "--out", str(out)]) == 0
    return out / "spec.yaml"


def _penguins(tmp_path: Path) -> tuple[pd.DataFrame, Path]:
    land_table(TABLES["penguins"], tmp_path / "data")
    path = _draft(tmp_path, "penguins", TABLES["penguins"].raw_path, (tmp_path / "data").as_uri())
    spec = load_spec(path)
    raw = read_source_file((tmp_path / "data" / TABLES["penguins"].raw_path).as_uri(),
                           spec.primary_source)
    return raw, path


def _shares(prepared: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    return (prepared["_split"].value_counts(normalize=True),
            pd.crosstab(prepared["label"], prepared["_split"]))


def test_a_keyless_table_splits_by_the_fractions_with_every_class_everywhere(tmp_path):
    raw, path = _penguins(tmp_path)
    drafted = yaml.safe_load(path.read_text())["split"]
    assert drafted["by"] == "row" and drafted["stratify"] is True
    shares, classes = _shares(prepare_rows(raw, load_spec(path)))
    for name, want in (("train", 0.8), ("eval", 0.1), ("test", 0.1)):
        assert abs(shares[name] - want) < 0.02, shares
    assert (classes > 0).all().all(), classes
    # what the issue saw: hashing the drafted non-unique key puts whole groups in one split
    spec = load_spec(path)
    grouped = spec.__class__(**{**spec.__dict__, "split": split_like(spec, by="key")})
    shares, classes = _shares(prepare_rows(raw, grouped))
    assert abs(shares["test"] - 0.1) > 0.03 or (classes == 0).any().any()


def split_like(spec, **changes):
    from dataclasses import replace

    return replace(spec.split, stratify=False, **changes)


def test_a_regression_spreads_its_rows_by_the_fractions(tmp_path):
    # a hash split is a binomial draw: a drawn 125-row table expected 25 test rows and got 16,
    # which training refused; drafted stratified, each split gets its share within a row
    rng = np.random.default_rng(7)
    raw = tmp_path / "data" / "raw" / "small" / "small.csv"
    raw.parent.mkdir(parents=True)
    raw.write_text("x,target\n" + "".join(f"{rng.normal():.4f},{rng.gamma(2.0):.4f}\n"
                                            for _ in range(125)))
    out = tmp_path / "specs" / "small"
    assert main(["spec", "init", "--name", "small", "--source", "raw/small/small.csv", "--root",
                 (tmp_path / "data").as_uri(), "--label", "target", "--task", "regression",
                 "--out", str(out)]) == 0
    doc = yaml.safe_load((out / "spec.yaml").read_text())
    assert doc["split"]["stratify"] is True
    spec = load_spec(out / "spec.yaml")
    frame = read_source_file(raw.as_uri(), spec.primary_source)
    counts = prepare_rows(frame, spec)["_split"].value_counts()
    for name, share in doc["split"]["fractions"].items():
        assert abs(counts[name] - 125 * share) <= 1, counts
    plain = [prepare_rows(frame, spec.__class__(**{**spec.__dict__, "split": split_like(
        spec, salt=f"s{i}")}))["_split"].value_counts()["test"] for i in range(12)]
    assert max(plain) - min(plain) > 2  # the hash split's spread, for contrast


def test_identical_rows_are_rows_of_their_own() -> None:
    frame = pd.DataFrame({"a": ["1", "1", "1", "2"], "b": ["x", "x", "x", "y"]})
    units = np.zeros(4, dtype=np.int64)
    h = writer.row_hash(frame, ("a", "b"), "s", units)
    assert len(set(h.tolist())) == 4  # three copies, three identities
    again = writer.row_hash(frame.iloc[[3, 1, 0, 2]], ("a", "b"), "s", units)
    assert sorted(h.tolist()) == sorted(again.tolist())  # order among copies does not matter


def test_stratified_positions_give_each_class_its_share() -> None:
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, 1000, dtype=np.uint64)
    labels = pd.Series(np.where(np.arange(1000) < 23, "snow", "sun"))
    pos = writer.stratified_positions(hashes, labels, np.zeros(1000, dtype=np.int64), "s")
    names = writer.assign_split(hashes, (("train", 0.8), ("eval", 0.1), ("test", 0.1)), pos)
    snow = pd.Series(names[:23]).value_counts()
    assert snow["test"] in (2, 3) and snow["eval"] in (2, 3)  # 23 x 0.1, within a row


_DIGEST = """
import hashlib, sys
from etl.kinds.tabular.read import read_source_file
from etl.spec import load_spec
from etl.kinds.tabular.prepare import prepare_rows
from etl.kinds.landing import LandOptions
spec = load_spec(sys.argv[1])
raw = read_source_file(sys.argv[2], spec.primary_source)
out = prepare_rows(raw, spec)
print(hashlib.sha256("".join(out["_split"]).encode()).hexdigest())
"""


def test_the_split_is_the_same_on_another_machine(tmp_path):
    """Another process, other hash seed, locale and thread count: the same split per row."""
    raw, path = _penguins(tmp_path)
    uri = (tmp_path / "data" / TABLES["penguins"].raw_path).as_uri()
    env = {**os.environ, "PYTHONHASHSEED": "12345", "LC_ALL": "C", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    other = subprocess.run([sys.executable, "-c", _DIGEST, str(path), uri], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    import hashlib

    here = prepare_rows(raw, load_spec(path))["_split"]
    assert other == hashlib.sha256("".join(here).encode()).hexdigest()


def _record_hashes(manifest: dict) -> dict[str, str]:
    return {s: manifest.splits[s].content_hash for s in ("train", "eval", "test")}


@pytest.mark.usefixtures("client")
def test_day_by_day_and_bulk_builds_split_alike(tmp_path, monkeypatch):
    """Seattle days (dates written 2012/01/01) as one file a day, one day holding a row twice:
    drafted, then built nightly and in one run: the same records per split."""
    data = tmp_path / "data"
    rel = land_daily(TABLES["seattle_weather"], data, days=8)
    dup = data / rel.format(date="2012-01-03")
    dup.write_text(dup.read_text() + dup.read_text().splitlines()[1] + "\n")
    path = _draft(tmp_path, "seattle_weather", rel, data.as_uri())
    doc = yaml.safe_load(path.read_text())
    columns = doc["sources"]["seattle_weather"]["columns"]
    assert columns["date"] == {"type": "timestamp", "format": "%Y/%m/%d"}
    assert doc["sources"]["seattle_weather"]["event_time"] == "date"
    assert doc["split"]["by"] == "row" and doc["split"]["stratify"]
    doc["label"]["classes"] = ["drizzle", "rain", "sun"]  # a day alone may lack a class
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(path.parent.parent))
    roots = {k: tmp_path / k for k in ("nightly", "bulk")}
    for where in roots.values():
        shutil.copytree(data / "raw", where / "raw")
    for day in range(4, 10):
        res = pipeline.run("seattle_weather", roots["nightly"].as_uri(), f"2012-01-{day:02d}",
                           run_id=f"n{day}")
    bulk = pipeline.run("seattle_weather", roots["bulk"].as_uri(), "2012-01-09", run_id="bulk")
    a, b = (versions.read_manifest(r.version_uri) for r in (res, bulk))
    assert _record_hashes(a) == _record_hashes(b)
    assert sum(a.splits[s].num_examples for s in a.splits) == 9  # 8 days + the copy
    assert json.dumps(a.statistics.label_counts, sort_keys=True) == \
        json.dumps(b.statistics.label_counts, sort_keys=True)


LEAKAGE = {"dep_time", "dep_delay", "arr_time", "air_time", "arr_delay"}


@pytest.fixture(scope="module")
def final(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, dict]:
    """Four real days, transformed as a segment build does: the frame the writer gets."""
    root = f"file://{tmp_path_factory.mktemp('raw')}"
    land(root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 5)))
    spec = load_spec("flights")
    uris = plan.window_files(root, spec.primary_source, None, datetime(2013, 1, 5, tzinfo=UTC))
    rights, _, _ = read_lookups(root, spec)
    prepared = transform.prepare_rows(
        join_lookups(extract.read_files(uris, spec.primary_source)[0], spec, rights), spec)
    stats = transform.finalize_partial(transform.split_partial(prepared, spec), spec)
    return transform.finalize_rows(prepared, spec, stats["label_schema"]), stats


def _write(frame: pd.DataFrame, out: Path, config: writer.WriteConfig) -> dict[str, list[dict]]:
    spec = load_spec("flights")
    return writer.write_frame(frame, "flights", f"file://{out}", manifest_schema(spec),
                              [s for s, _ in spec.split.fractions], config)


def test_plan_is_pure_arithmetic() -> None:
    plan = writer.plan_shards({"train": 1000, "eval": 100, "test": 10}, 400.0, 100_000)
    assert plan.num_shards["train"] == shards.num_shards_for(400_000, 100_000)
    assert plan.offset("eval") == plan.num_shards["train"]
    assert plan.shard_of(plan.total - 1) == ("test", plan.num_shards["test"] - 1)
    with pytest.raises(IndexError):
        plan.shard_of(plan.total)


def test_an_empty_split_gets_no_shard() -> None:
    plan = writer.plan_shards({"train": 0, "eval": 1, "test": 0}, 400.0, 100_000, 10)
    assert plan.num_shards == {"train": 0, "eval": 1, "test": 0} and plan.total == 1
    assert plan.shard_of(0) == ("eval", 0)


@pytest.mark.parametrize(("train", "least", "expected"), [
    (300_000, 10, 10),  # a year of flights: 10 train files though ~100 MB fit in one
    (300_000, 1, 1),
    (100_000, 10, 3),  # never shards under 10 MiB on average (40 MB: 3 files)
    (4_500, 10, 1),  # ... nor under 1000 records
    (999, 10, 1),
    (50_000_000, 10, 150),  # large data: the byte target decides
])
def test_train_split_gets_at_least_min_train_shards(train, least, expected) -> None:
    plan = writer.plan_shards({"train": train, "eval": train // 8, "test": train // 8}, 400.0,
                              128 * 2**20, least)
    assert plan.num_shards["train"] == expected
    assert plan.num_shards["eval"] == shards.num_shards_for(train // 8 * 400, 128 * 2**20)


def test_shards_hold_their_rows_sorted_and_are_reproducible(final, tmp_path: Path) -> None:
    frame, stats = final
    config = writer.WriteConfig(target_bytes=200_000)  # the default, deterministic encoder
    first = _write(frame, tmp_path / "a", config)
    again = _write(frame.sample(frac=1.0, random_state=7), tmp_path / "b", config)
    assert first == again  # same rows in any order: same files, same bytes
    assert len(first["train"]) > 1
    for split, entries in first.items():
        n = len(entries)
        assert [e["file"] for e in entries] == [
            shards.shard_filename("flights", split, i, n, None) for i in range(n)]
        assert sum(e["records"] for e in entries) == stats["split_counts"][split]
        for e in entries:
            data = (tmp_path / "a" / e["file"]).read_bytes()
            assert len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"]
    sizes = [e["bytes"] for e in first["train"]]
    assert max(sizes) < 2 * 200_000 and min(sizes) > 200_000 / 4


def test_examples_parse_back_without_leakage(final, tmp_path: Path) -> None:
    import tensorflow as tf

    frame, stats = final
    spec = load_spec("flights")
    entries = _write(frame, tmp_path, writer.WriteConfig(compression="gzip"))
    (shard,) = entries["eval"]
    assert shard["file"].endswith(".gz")
    records = list(tf.data.TFRecordDataset(str(tmp_path / shard["file"]),
                                           compression_type="GZIP").as_numpy_iterator())
    assert len(records) == stats["split_counts"]["eval"]
    first = tf.train.Example.FromString(records[0])
    assert set(first.features.feature) == set(spec.manifest_schema()["features"]) | {"late"}
    assert not set(first.features.feature) & LEAKAGE
    expected = frame[frame["_split"] == "eval"].sort_values("_hash").reset_index(drop=True)
    feats = {name: tf.io.FixedLenFeature([], tf.string if f["dtype"] == "string" else
                                         tf.float32 if f["dtype"] == "float32" else tf.int64)
             for name, f in spec.manifest_schema()["features"].items()}
    feats["late"] = tf.io.FixedLenFeature([], tf.int64)
    parsed = tf.io.parse_example(records, feats)
    np.testing.assert_array_equal(parsed["late"].numpy(), expected["late"].to_numpy())
    np.testing.assert_array_equal(parsed["distance"].numpy(), expected["distance"].to_numpy())
    assert [v.decode() for v in parsed["dest"].numpy()] == expected["dest"].tolist()


def test_encoders_write_the_same_examples(final, tmp_path: Path) -> None:
    """The default writes the Python baseline's bytes; tfx-bsl the same Examples (its feature
    order varies per call, so only parsed equality holds)."""
    from tensorflow.core.example import example_pb2

    frame, _ = final
    out = {name: _write(frame, tmp_path / name, writer.WriteConfig(encoder=name))
           for name in writer.ENCODERS}
    assert out["vectorized"] == out["python"]  # same files, records, bytes and sha256
    for split, entries in out["tfx"].items():
        assert [e["records"] for e in entries] == [e["records"] for e in out["python"][split]]
        for a, b in zip(entries, out["python"][split]):
            ra = readback.iter_records(f"file://{tmp_path}/tfx/{a['file']}")
            rb = readback.iter_records(f"file://{tmp_path}/python/{b['file']}")
            assert [example_pb2.Example.FromString(r) for r in ra] == [
                example_pb2.Example.FromString(r) for r in rb]  # same Examples, same order
    with pytest.raises(ValueError, match="encoder"):
        _write(frame, tmp_path / "x", writer.WriteConfig(encoder="fast"))


def test_a_splits_entry_lists_its_shards_as_written_with_an_order_free_content_hash() -> None:
    """``split_info`` keeps the four keys of each shard the writer reports; the content hash
    of records is the same however they are grouped, and the parts' hashes combine."""
    shard = {"file": "f-train.tfrecord-00000-of-00001", "records": 3, "bytes": 120,
             "sha256": "ab" * 32}
    info = writer.split_info([{**shard, "ignored": "x"}], "1" * 64)
    assert info.to_json() == {"num_examples": 3, "num_bytes": 120, "content_hash": "1" * 64,
                              "shards": [shard]}
    records = [b"a", b"bb", b"ccc"]
    whole = writer.content_hash(map(writer.record_digest, records))
    assert whole == writer.content_hash(map(writer.record_digest, reversed(records)))
    parts = [writer.content_hash(map(writer.record_digest, r)) for r in (records[:1], records[1:])]
    assert writer.combine_content(parts) == whole

