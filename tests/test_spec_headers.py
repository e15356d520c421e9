"""A spec column may read any file header (``source:``): parsed into the Source, checked, and
a header used where an identifier belongs is named with the identifier to use instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from etl.spec import SPECS_DIR, SpecError, load_spec


def _write(tmp_path: Path, columns: dict, mutate=None) -> Path:
    raw = yaml.safe_load((SPECS_DIR / "flights" / "spec.yaml").read_text())
    raw["sources"]["flights"]["columns"].update(columns)
    if mutate:
        mutate(raw)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def test_source_headers_parsed_into_the_source(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, {
        "ship_mode": {"type": "string", "source": "Ship Mode"},
        "groesse": {"type": "float64", "source": "Größe"},
        "class": "string",
        "shipped": {"type": "timestamp", "format": "%d.%m.%Y", "source": "Ship.Date"}}))
    src = spec.sources["flights"]
    assert src.headers == {"ship_mode": "Ship Mode", "groesse": "Größe", "shipped": "Ship.Date"}
    assert src.header("ship_mode") == "Ship Mode" and src.header("class") == "class"
    assert src.columns["shipped"] == "timestamp" and src.time_formats["shipped"] == "%d.%m.%Y"
    assert src.describe("groesse") == "'groesse' (header 'Größe')"
    assert src.describe("distance") == "'distance'"
    assert spec.column_types()["ship_mode"] == "string"  # identifiers downstream, not headers


def test_source_equal_to_the_name_is_plain(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, {"price": {"type": "float64", "source": "price"}}))
    assert "price" not in spec.sources["flights"].headers


@pytest.mark.parametrize("columns, message", [
    ({"ship_mode": {"type": "string", "source": ""}},
     "sources.flights.columns.ship_mode.source: expected the column's header"),
    ({"year2": {"type": "int64", "source": 2024}}, "quote it: source: \"2024\""),
    ({"dist2": {"type": "float64", "source": "distance"}},
     "reads header 'distance', which column"),
    ({"a": {"type": "string", "source": "Ship Mode"}, "b": {"type": "string", "source": "Ship Mode"}},
     "columns.b: reads header 'Ship Mode', which column 'a'"),
    ({"Ship Mode": "string"}, "e.g. some_name: {type: string, source: 'Ship Mode'}"),
    ({"2nd_score": "float64"}, "'2nd_score' is not an identifier"),
    ({"ship_mode": {"type": "string", "header": "Ship Mode"}},
     "columns.ship_mode.header: unknown field"),
])
def test_bad_source_names_the_field(tmp_path: Path, columns: dict, message: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(_write(tmp_path, columns))
    assert message in str(info.value) and str(tmp_path / "spec.yaml") in str(info.value)


def test_header_where_an_identifier_belongs_names_the_identifier(tmp_path: Path) -> None:
    def use_header(raw: dict) -> None:
        raw["features"].append({"name": "ship", "kind": "categorical",
                                "derive": {"op": "copy", "columns": ["Ship Mode"]}})

    path = _write(tmp_path, {"ship_mode": {"type": "string", "source": "Ship Mode"}}, use_header)
    with pytest.raises(SpecError, match=r"features\[\d+\]\.derive\.columns: 'Ship Mode' is not an "
                       r"extracted column; 'Ship Mode' is the header of column 'ship_mode'"):
        load_spec(path)
