"""Bad raw input, one real corrupted file per case: quarantined or refused, never half-published.

Each case lands three real days, publishes the first, breaks a file of the next window and
runs the whole ETL on that window. A refusal must name the file, the row or column and what
was expected; in every case the published version keeps its bytes and readers see nothing new.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from etl import pipeline, storage, versions
from tests.reliability.conftest import (
    BASE_VERSION,
    DATASET,
    NEXT_END,
    NEXT_START,
    NEXT_VERSION,
    SHARD_BYTES,
    assert_untouched,
    day_file,
)
from tests.reliability.corpus import BAD_DAY, CASES, Case, Fails


def _run(root: str, run_id: str, **kw: object) -> pipeline.PublishedVersion:
    return pipeline.run(DATASET, root, NEXT_END, NEXT_START, run_id=run_id,
                        shard_bytes=SHARD_BYTES, **kw)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, root: str, root_path: Path, base_digest: dict,
                   dask_client: object) -> None:
    case.edit(day_file(root_path, BAD_DAY))
    if isinstance(case.expect, Fails):
        with pytest.raises(Exception) as info:
            _run(root, f"bad-{case.name}")
        message = str(info.value)
        assert type(info.value).__name__ == case.expect.error, message
        for pattern in case.expect.patterns:
            assert re.search(pattern, message), f"{pattern!r} not in: {message}"
        assert_untouched(root, base_digest)
        return
    result = _run(root, f"ok-{case.name}")
    assert result.created and result.version == NEXT_VERSION
    manifest = versions.read_manifest(result.version_uri)
    assert manifest.verdict.quarantined_rows == case.expect.quarantined
    if case.expect.quarantined:  # kept in the segments the manifest lists, named by it
        files = manifest.verdict.quarantine_files
        assert files, "quarantined rows must be kept and named in the manifest"
        dataset_uri = storage.join(root, "datasets", DATASET)
        for name in files:
            assert name.startswith("segments/") and storage.exists(
                storage.join(dataset_uri, name)), name
    versions.verify_shards(result.version_uri, manifest)
    assert_untouched(root, base_digest, new_version=NEXT_VERSION)


def test_fixed_input_then_publishes_under_the_same_run_id(root: str, root_path: Path,
                                                          base_digest: dict,
                                                          dask_client: object) -> None:
    """A failed run leaves nothing in the way: fix the file, retry the same run id, publish."""
    bad = day_file(root_path, BAD_DAY)
    good = bad.read_bytes()
    bad.write_bytes(good.replace(b",EWR,", b",,", 1))
    with pytest.raises(Exception, match="origin"):
        _run(root, "retry-me")
    bad.write_bytes(good)
    result = _run(root, "retry-me")
    assert result.created and result.version == NEXT_VERSION
    assert_untouched(root, base_digest, new_version=NEXT_VERSION)
    assert storage.list_dir(f"{root}/staging") == []
    assert BASE_VERSION in versions.list_versions(root, DATASET)
    shutil.rmtree(root_path / "staging", ignore_errors=True)


def _parquet_spec(tmp_path: Path) -> str:
    """The flights spec with its primary source as daily Parquet files (the same dataset)."""
    import yaml

    from etl.spec import SPECS_DIR

    folder = tmp_path / "spec-parquet"
    folder.mkdir()
    raw = yaml.safe_load((SPECS_DIR / DATASET / "spec.yaml").read_text(encoding="utf-8"))
    flights = raw["sources"]["flights"]
    flights.update(uri="raw/flights/date={date}/flights.parquet", format="parquet")
    flights.pop("read", None)
    shutil.copy(SPECS_DIR / DATASET / raw["expectations"], folder / raw["expectations"])
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return str(folder / "spec.yaml")


def _land_as_parquet(csv_path: Path) -> Path:
    """A landed day rewritten as typed Parquet, as an upstream Parquet exporter would."""
    import pandas as pd

    df = pd.read_csv(csv_path, na_values=["NA"], keep_default_na=False)
    df["time_hour"] = pd.to_datetime(df["time_hour"], utc=True)
    out = csv_path.with_suffix(".parquet")
    df.to_parquet(out, index=False, row_group_size=100)
    return out


def test_truncated_parquet_is_refused_naming_the_file(root: str, root_path: Path,
                                                      base_digest: dict, tmp_path: Path,
                                                      dask_client: object) -> None:
    """A Parquet day cut off mid-file (its footer lost) fails the run; nothing is published."""
    spec = _parquet_spec(tmp_path)
    files = [_land_as_parquet(day_file(root_path, d)) for d in (BAD_DAY, "2013-01-03")]
    data = files[0].read_bytes()
    files[0].write_bytes(data[:len(data) * 3 // 5])  # the upload died 60% of the way in
    with pytest.raises(Exception) as info:
        pipeline.run(spec, root, NEXT_END, NEXT_START, run_id="bad-parquet",
                     shard_bytes=SHARD_BYTES)
    message = str(info.value)
    assert type(info.value).__name__ == "SourceReadError", message
    for pattern in (f"date={BAD_DAY}/flights.parquet", "not a valid Parquet file",
                    "truncated", r"expected .*footer", f"{len(data) * 3 // 5} bytes"):
        assert re.search(pattern, message), f"{pattern!r} not in: {message}"
    assert_untouched(root, base_digest)


@pytest.mark.parametrize("damage, expected", [
    (lambda b: b[:-1], r"truncated.*expected b'PAR1'"),  # only the last byte lost
    (lambda b: b[:7], r"\(7 bytes; truncated"),  # cut inside the header
    (lambda b: b[:100] + bytes(4000) + b[4100:], "not a valid Parquet file"),  # pages zeroed
], ids=["last-byte-lost", "stub", "pages-zeroed"])
def test_damaged_parquet_is_named_without_a_run(root_path: Path, tmp_path: Path,
                                                damage: object, expected: str) -> None:
    """Other damage (one byte short, a stub, zeroed pages) gets the same kind of refusal."""
    import dataclasses

    from etl.kinds.tabular.read import SourceReadError, read_source_file
    from etl.spec import load_spec

    path = _land_as_parquet(day_file(root_path, BAD_DAY))
    path.write_bytes(damage(path.read_bytes()))
    source = dataclasses.replace(load_spec(DATASET).primary_source, format="parquet")
    with pytest.raises(SourceReadError, match=expected) as info:
        read_source_file(f"file://{path}", source)
    assert f"date={BAD_DAY}/flights.parquet" in str(info.value)
