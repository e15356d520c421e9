"""etl.spec.model: a spec column may read any file header (``source:``): parsed into the Source,
checked, and a header used where an identifier belongs is named with the identifier to use
instead. (The identifier a draft gives a header: tests/etl/authoring/test_columns.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from etl.spec import SPECS_DIR, SpecError, load_spec
from etl.spec.model import RESERVED_COLUMNS, RESERVED_PREFIX


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


@pytest.mark.parametrize("columns, mutate, message", [
    ({"_split": "string"}, None, "sources.flights.columns: '_split' is a name the pipeline uses"),
    ({"split_col": {"type": "string", "source": "_split"}}, None, None),  # as a header: fine
    ({}, lambda r: r["label"].update(name="quarantine_reason"), "label.name: 'quarantine_reason'"),
    ({}, lambda r: r["features"][0].update(name="_hash"), "features[0].name: '_hash'"),
    ({}, lambda r: r["joins"][0].update(prefix="__join_"), "joins[0].prefix: '__join_"),
])
def test_the_pipelines_own_column_names_are_refused(tmp_path: Path, columns: dict, mutate,
                                                    message: str | None) -> None:
    path = _write(tmp_path, columns, mutate)
    if message is None:
        assert load_spec(path).sources["flights"].header("split_col") == "_split"
        return
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(path)


def test_reserved_names_are_the_ones_the_pipeline_adds() -> None:
    """The spec cannot import the stages (it stays import-light), so this keeps them in step."""
    from etl.kinds.tabular.prepare import MISSING_COL
    from etl.kinds.tabular.read import _JOIN_PREFIX
    from etl.validation import REASON_COLUMN
    from etl.write.writer import HASH_COL, RECORD_COL, SHARD_COL, SPLIT_COL

    assert {HASH_COL, SPLIT_COL, REASON_COLUMN, RECORD_COL, SHARD_COL,
            MISSING_COL} == RESERVED_COLUMNS
    assert _JOIN_PREFIX == RESERVED_PREFIX
