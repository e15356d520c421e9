"""The reader finds columns by their file headers and names them by identifier, in every format
and for lookup sources too; a missing header is refused naming the file, the header and the
column that reads it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from etl.sources.read import SourceReadError, read_source_file
from etl.spec import Source

HEADERS = {"ship_mode": "Ship Mode", "postal_code": "Postal.Code", "score": "2nd score",
           "groesse": "Größe", "shipped": "Ship Date"}
ROWS = pd.DataFrame({"Ship Mode": ["First Class", "Same Day"], "Postal.Code": ["02134", "10001"],
                     "2nd score": [1.5, None], "Größe": [3, 4], "class": ["A", "B"],
                     "Price": [10.5, 20.25], "price": [1.5, 2.5],
                     "Ship Date": ["31.12.2024", "01.01.2025"], "unused col": ["x", "y"]})


def _source(path: Path, fmt: str, **headers: str) -> Source:
    columns = {c: "string" for c in (*HEADERS, "class", "Price", "price")}
    columns["shipped"] = "timestamp"
    return Source(name="orders", uri=path.as_uri(), format=fmt, columns=columns,
                  headers={**HEADERS, **headers}, time_formats={"shipped": "%d.%m.%Y"})


def _write(tmp_path: Path, fmt: str) -> Path:
    path = tmp_path / f"orders.{fmt}"
    if fmt == "csv":
        ROWS.to_csv(path, index=False)
    elif fmt == "parquet":
        ROWS.to_parquet(path, index=False)
    else:
        ROWS.to_json(path, orient="records", lines=True, force_ascii=False)
    return path


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_columns_come_out_by_identifier(tmp_path: Path, fmt: str) -> None:
    source = _source(_write(tmp_path, fmt), fmt)
    df = read_source_file(source.uri, source)
    assert list(df.columns) == list(source.columns)  # identifiers, in spec order
    assert df["ship_mode"].tolist() == ["First Class", "Same Day"]
    assert df["postal_code"].tolist() == ["02134", "10001"]  # text as the file holds it
    assert df["score"].tolist()[0] == "1.5" and pd.isna(df["score"].tolist()[1])
    assert df["groesse"].tolist() == ["3", "4"]
    assert df["Price"].tolist() == ["10.5", "20.25"] and df["price"].tolist() == ["1.5", "2.5"]
    assert df["shipped"].tolist() == ["2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_missing_header_names_file_header_and_column(tmp_path: Path, fmt: str) -> None:
    source = _source(_write(tmp_path, fmt), fmt, ship_mode="Ship mode")
    with pytest.raises(SourceReadError) as info:
        read_source_file(source.uri, source)
    msg = str(info.value)
    assert msg.startswith(f"{source.uri}: missing column(s) ['Ship mode'] ('Ship mode' read as "
                          f"column 'ship_mode')"), msg
    assert "renamed? 'Ship mode' -> 'Ship Mode'" in msg


def test_a_quoted_csv_header_is_listed_as_the_reader_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('"Ship Mode","Postal, Code"\nA,1\n')
    source = Source(name="q", uri=path.as_uri(), format="csv",
                    columns={"ship_mode": "string", "postal_code": "string"},
                    headers={"ship_mode": "Ship Mode", "postal_code": "Postal Code"})
    with pytest.raises(SourceReadError, match=r"found \['Ship Mode', 'Postal, Code'\]"):
        read_source_file(source.uri, source)


def test_a_bad_timestamp_names_the_column_and_its_header(tmp_path: Path) -> None:
    path = _write(tmp_path, "csv")
    path.write_text(path.read_text(encoding="utf-8").replace("01.01.2025", "2025-01-01"),
                    encoding="utf-8")
    source = _source(path, "csv")
    with pytest.raises(SourceReadError, match=r"row 2, column 'shipped' \(header 'Ship Date'\): "
                       r"'2025-01-01' does not parse as a timestamp in format '%d.%m.%Y'"):
        read_source_file(source.uri, source)
