"""Timestamp columns with a declared format (``etl.sources.times``, applied by the reader):
parsed to ISO text, a bad value named by file, row and column, a bad declaration refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from etl.authoring.columns import ColumnProfile, column_profiles, null_tokens
from etl.authoring.profile import Origin, profile_frame
from etl.sources.read import SourceReadError, read_source_file
from etl.sources.times import parse_timestamps
from etl.spec import Source, SpecError
from etl.spec.model import column_type


def profile_column(name: str, values: pd.Series) -> ColumnProfile:
    """One column of text values profiled on its own, as ``spec init`` profiles a table."""
    frame = pd.DataFrame({name: values.astype("string[pyarrow]")})
    table = profile_frame(frame, Origin.one("", len(frame)), seed=0)
    return column_profiles(table, {name: name}, null_tokens(table))[name]


def _source(path: Path, fmt: str) -> Source:
    return Source(name="s", uri=path.as_uri(), format="csv",
                  columns={"day": "timestamp", "v": "int64"}, time_formats={"day": fmt})


def test_formats_are_read_as_iso_text(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("day,v\n2012/01/31,1\n,2\n")
    got = read_source_file(path.as_uri(), _source(path, "%Y/%m/%d"))
    assert got["day"].tolist()[0] == "2012-01-31T00:00:00Z" and pd.isna(got["day"].iloc[1])
    epoch = parse_timestamps(pd.Series(["1325376000", None]), "epoch_s")
    assert str(epoch.iloc[0]) == "2012-01-01 00:00:00+00:00" and pd.isna(epoch.iloc[1])


def test_a_value_that_does_not_parse_names_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("day,v\n2012/01/31,1\n2012/02/30,2\n2012-03-01,3\n")
    with pytest.raises(SourceReadError) as err:
        read_source_file(path.as_uri(), _source(path, "%Y/%m/%d"))
    assert str(err.value).startswith(f"{path.as_uri()}: row 2, column 'day': '2012/02/30'")
    assert "'%Y/%m/%d' (2 such value(s))" in str(err.value)


def test_declarations_are_checked_and_inferred() -> None:
    assert column_type({"type": "timestamp", "format": "epoch_s"}, "w") == ("timestamp", "epoch_s")
    with pytest.raises(SpecError, match=r"w.format: only a timestamp column takes a format"):
        column_type({"type": "int64", "format": "%Y"}, "w")
    with pytest.raises(SpecError, match="expected strftime codes"):
        column_type({"type": "timestamp", "format": "YYYY"}, "w")
    prof = profile_column("d", pd.Series(["2012/01/01", "2012/12/31", None]))
    assert prof.type == "timestamp" and prof.time_format == "%Y/%m/%d"
    assert profile_column("c", pd.Series(["a1", "b2"])).time_format is None
