"""etl.kinds.landing: what every kind's landing shares -- a raw file lands once (the same bytes
again change nothing, other bytes are refused unless overwritten) -- and `python -m etl land`
names what it landed in the kind's own unit (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from etl import kinds
from etl.__main__ import main
from etl.kinds.landing import LandingConflictError, LandReport, land_files, parse_day


def test_a_raw_file_lands_once_and_is_never_changed_unasked(tmp_path: Path) -> None:
    uris = [(tmp_path / name).as_uri() for name in ("b.csv", "a.csv")]
    first = land_files([(uris[0], b"x\n"), (uris[1], lambda: b"y\n")], False,
                       LandReport(tmp_path.as_uri()))
    assert first.written == sorted(uris) and first.unchanged == []
    again = land_files([(uris[0], b"x\n")], False, LandReport(tmp_path.as_uri()))
    assert again.unchanged == [uris[0]] and again.written == []
    with pytest.raises(LandingConflictError, match="b.csv: already landed with different"):
        land_files([(uris[0], b"z\n")], False, LandReport(tmp_path.as_uri()))
    replaced = land_files([(uris[0], b"z\n")], True, LandReport(tmp_path.as_uri()))
    assert replaced.replaced == [uris[0]] and (tmp_path / "b.csv").read_bytes() == b"z\n"


def test_a_day_that_is_no_day_is_named() -> None:
    assert str(parse_day("2013-01-02")) == "2013-01-02"
    with pytest.raises(ValueError, match="expected a day like 2013-01-01, got '2013/01/02'"):
        parse_day("2013/01/02")


@pytest.mark.parametrize("dataset,unit", [("digits", "images"), ("flights", "rows")])
def test_land_reports_rows_in_the_kinds_unit(dataset: str, unit: str, monkeypatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    report = LandReport("file:///x/raw", written=["a"], rows=1797, unit=unit)
    monkeypatch.setattr(kinds, "land", lambda *a, **k: report)
    assert main(["land", "--root", "file:///x", "--dataset", dataset]) in (0, None)
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"; 1,797 {unit}") and "flights" not in out.split(";")[-1]
