"""`python -m etl land` names what it landed in the dataset kind's own unit (issue 17)."""

from __future__ import annotations

import pytest

from etl import kinds
from etl.__main__ import main
from etl.sources.land import LandReport


@pytest.mark.parametrize("dataset,unit", [("digits", "images"), ("flights", "rows")])
def test_land_reports_rows_in_the_kinds_unit(dataset: str, unit: str, monkeypatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    report = LandReport("file:///x/raw", written=["a"], rows=1797)
    monkeypatch.setattr(kinds, "land", lambda *a, **k: report)
    assert main(["land", "--root", "file:///x", "--dataset", dataset]) in (0, None)
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"; 1,797 {unit}") and "flights" not in out.split(";")[-1]


def test_every_kind_names_its_unit() -> None:
    assert {k.name: k.unit for k in kinds.KINDS.values()} == {"tabular": "rows", "images": "images"}
