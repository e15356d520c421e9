"""The tiny-partition dataset of `make bench` (issue 25): seeded, deterministic, one row a
day, the same rows as one file, and specs that load."""

from __future__ import annotations

from pathlib import Path

from bench import tiny


def test_rows_depend_only_on_seed_and_days() -> None:
    assert tiny.rows(50, seed=3) == tiny.rows(50, seed=3)
    assert tiny.rows(50, seed=3) != tiny.rows(50, seed=4)
    assert tiny.rows(20) == tiny.rows(50)[:20]  # a longer span extends, never reshuffles
    assert len({r[1] for r in tiny.rows(tiny.DAYS)}) == tiny.DAYS >= 1000  # one row a day


def test_land_writes_one_row_per_day_and_the_same_rows_as_one_file(tmp_path: Path) -> None:
    assert tiny.land(f"file://{tmp_path}", 5, seed=7) == 6
    days = sorted((tmp_path / "raw" / tiny.PARTITIONED).glob("date=*/tiny_days.csv"))
    assert [p.parent.name for p in days] == [f"date=2013-01-0{i}" for i in range(1, 6)]
    header, *one = (tmp_path / "raw" / tiny.ONE_FILE / "tiny_onefile.csv").read_text().splitlines()
    assert header == ",".join(tiny.COLUMNS)
    assert [p.read_text().splitlines()[1] for p in days] == one
    again = tmp_path / "again"
    tiny.land(f"file://{again}", 5, seed=7)
    assert (again / "raw/tiny_onefile/tiny_onefile.csv").read_bytes() == \
        (tmp_path / "raw/tiny_onefile/tiny_onefile.csv").read_bytes()


def test_specs_load_partitioned_by_day_and_as_one_file(monkeypatch) -> None:
    from etl.spec import load_spec

    monkeypatch.setenv("PIPELINE_SPECS_PATH", str(tiny.SPECS_DIR))
    days, one = load_spec(tiny.PARTITIONED), load_spec(tiny.ONE_FILE)
    assert days.primary_source.partitioning is not None
    assert one.primary_source.partitioning is None
    assert days.split == one.split and days.key == one.key  # same examples in both versions
    assert list(days.primary_source.columns) == list(tiny.COLUMNS)
