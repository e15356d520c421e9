"""etl.kinds.images.window: image segments built from small real image sets (JPEG, RGB,
CSV/JSON label index, corrupt files quarantined or failing the run) and the digits through
the same chain as a table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from etl import pipeline, versions
from etl.errors import ValidationFailed
from etl.versions.segment import Schema
from etl.write.writer import content_hash, record_digest
from tests.support.images import CLASSES, image, pets_spec

END = "2024-01-01T00:00:00Z"
SPLIT = (("train", 0.8), ("eval", 0.1), ("test", 0.1))


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _land_pets(root: Path, n: int = 16) -> list[dict[str, str]]:
    """n RGB JPEGs of varying sizes, one truncated, one grayscale (wrong channels)."""
    folder = root / "raw" / "pets"
    folder.mkdir(parents=True)
    rows = []
    for i in range(n):
        data = image(10 + i % 7, 12 + i % 5, "RGB", "JPEG", i)
        if i == 3:
            data = data[: len(data) // 2]  # truncated
        if i == 5:
            data = image(12, 12, "L", "PNG", i)  # one channel where 3 are required
        name = f"img_{i:02d}.png" if i == 5 else f"img_{i:02d}.jpg"
        (folder / name).write_bytes(data)
        rows.append({"file": name, "label": CLASSES[i % 2]})
    return rows


def _write_index(root: Path, rows: list[dict[str, str]], fmt: str) -> None:
    folder = root / "raw" / "pets_index"
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        lines = ["file,label", *(f"{r['file']},{r['label']}" for r in rows)]
        (folder / "labels.csv").write_text("\n".join(lines) + "\n")
    else:
        (folder / "labels.json").write_text(json.dumps(rows))


def test_csv_index_jpeg_rgb_quarantines_bad_files_and_publishes(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path)
    _write_index(tmp_path, rows, "csv")
    spec = str(pets_spec(tmp_path))
    res = pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets")
    assert res.created and sum(res.splits.values()) == 14
    vdir = Path(res.version_uri[7:])
    manifest = json.loads((vdir / "manifest.json").read_text())
    assert manifest["validation"]["quarantined_rows"] == 2
    assert manifest["validation"]["evaluated_rows"] == 16
    assert manifest["schema"]["features"]["image"]["shape"] == [16, 16, 3]
    (listed,) = manifest["validation"]["quarantine_files"]  # in the image folder's segment
    quarantined = [json.loads(x) for x in (vdir.parent / listed).open()]
    assert {q["key"]: q["reason"].split(":")[0] for q in quarantined} == {
        "img_03.jpg": "cannot decode", "img_05.png": "1 channel(s) (mode L), expected [3]"}
    assert (vdir / "validation" / "results.json").is_file()
    from training.data.tfds import builder  # TFDS over the segment's dataset_info.json

    assert builder(vdir.as_uri()).info.features["image"].encoding_format == "jpeg"


def test_json_index_over_threshold_fails_naming_the_files(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path)
    _write_index(tmp_path, rows, "json")
    spec = str(pets_spec(tmp_path, quarantine={"max_fraction": 0.05},
                     source={"uri": "raw/pets", "layout": "index",
                             "index": {"uri": "raw/pets_index/labels.json", "format": "json"}}))
    with pytest.raises(ValidationFailed, match=r"2 of 16 image file\(s\).*img_03\.jpg: cannot "
                                                 r"decode.*img_05\.png: 1 channel"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-json")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []


def test_strict_mode_fails_on_any_bad_file(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path, n=6)
    _write_index(tmp_path, rows, "csv")
    spec = str(pets_spec(tmp_path, quarantine={"max_fraction": 0.5}))
    with pytest.raises(ValidationFailed, match=r"strict mode.*img_03\.jpg: cannot decode"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-strict", mode="strict")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []
    again = pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-quarantine")
    assert again.created and len(versions.list_versions(tmp_path.as_uri(), "pets")) == 1


def test_an_images_dataset_goes_through_the_same_chain(tmp_path: Path) -> None:
    """digits: one segment for the landed folder, reused by a run with nothing new, and a
    new one when an image is added; the version lists it like a tabular one, each split's
    content hash the sum of its records' digests."""
    from etl.kinds import land
    from etl.versions import segment
    from etl.write.readback import iter_records

    root = tmp_path.as_uri()
    land(root, "digits")
    first = pipeline.run("digits", root, "2026-01-01", run_id="a")
    (seg,) = segment.list_segments(root, "digits")
    manifest = versions.read_manifest(first.version_uri)
    assert seg.startswith("all-") and [s.segment for s in manifest.segments] == [seg]
    assert manifest.num_examples == 1797
    for split, info in manifest.splits.items():
        assert info.content_hash == content_hash(
            record_digest(r) for shard in info.shards
            for r in iter_records(versions.shard_uri(first.version_uri, shard))), split
    again = versions.read_manifest(pipeline.run("digits", root, "2026-01-02",
                                                run_id="b").version_uri)
    assert segment.list_segments(root, "digits") == [seg]
    assert [s.segment for s in again.segments] == [seg]
    extra = Path(tmp_path, "raw/digits/3")
    shutil.copy(min(extra.iterdir()), extra / "copy.png")
    third = versions.read_manifest(pipeline.run("digits", root, "2026-01-03",
                                                run_id="c").version_uri)
    assert len(segment.list_segments(root, "digits")) == 2
    assert [s.segment for s in third.segments] != [seg]
    assert third.verdict.evaluated_rows == 1798


def test_the_dask_writer_writes_the_in_process_writers_shards(client, tmp_path: Path) -> None:
    """``write_splits`` (one shard per Dask partition, written by workers) gives the same
    files, records and bytes as the shared in-process writer, however the frame is
    partitioned: one plan, one row order."""
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    from etl.kinds.images.window import write_splits
    from etl.write import writer

    rng = np.random.default_rng(3)
    n = 3000
    hashes = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
    frame = pd.DataFrame({"x": rng.normal(size=n).astype("float32"),
                          "c": rng.choice(["a", "b", "c"], n), "y": rng.integers(0, 2, n),
                          writer.HASH_COL: hashes,
                          writer.SPLIT_COL: writer.assign_split(hashes, SPLIT)})
    schema = Schema.from_json({"features": {"x": {"dtype": "float32"}, "c": {"dtype": "string"}},
                               "label": {"name": "y", "dtype": "int64", "classes": 2}}, "test")
    config = writer.WriteConfig(target_bytes=20_000)
    counts = frame[writer.SPLIT_COL].value_counts()
    alone = writer.write_frame(frame, "t", (tmp_path / "a").as_uri(), schema,
                               [s for s, _ in SPLIT], config)
    assert len(alone["train"]) > 1
    for parts in (1, 4):
        got = write_splits(dd.from_pandas(frame, npartitions=parts, sort=False), "t",
                           (tmp_path / f"d{parts}").as_uri(), schema,
                           {s: int(counts.get(s, 0)) for s, _ in SPLIT}, config)
        assert got == alone
