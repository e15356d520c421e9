"""``etl.validation.suite``: what validation needs from a spec -- its modes, the declared
columns' parse kinds and their text parsed by them -- checked without GX. (A suite file read
and split by level: ``test_gx.py``; modes and suite errors end to end: ``test_report.py``.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from etl.validation.suite import (
    ValidationSpec,
    check_mode,
    check_views,
    parse_column,
    typed_frame,
)


def test_declared_types_give_parse_kinds_and_a_mode_is_checked() -> None:
    vspec = ValidationSpec("d", ("k",), {"k": "int64", "x": "float64", "t": "timestamp",
                                         "s": "string", "odd": "decimal"}, Path("e.json"))
    assert vspec.kinds() == {"k": "int", "x": "float", "t": "timestamp", "s": "string",
                             "odd": "string"}
    assert ValidationSpec.of(vspec) is vspec
    assert check_mode("strict") == "strict"
    with pytest.raises(ValueError, match=r"mode: expected one of \('quarantine', 'strict'\)"):
        check_mode("lenient")


def test_text_parses_by_its_kind_and_bad_values_are_marked() -> None:
    clean, bad = parse_column(pd.Series(["1", "2.5", None]), "float")
    assert clean.tolist()[:2] == [1.0, 2.5] and np.isnan(clean.iloc[2])
    assert not bad.any()  # missing is not unparseable
    parsed, bad = parse_column(pd.Series(["12", "12a", None]), "int")
    assert parsed.iloc[0] == 12.0 and bad.tolist() == [False, True, False]
    stamps, bad = parse_column(pd.Series(["2013-01-01T05:00:00Z", "soon"]), "timestamp")
    assert str(stamps.dtype) == "datetime64[us, UTC]" and bad.tolist() == [False, True]
    assert parse_column(pd.Series([1.0, 2.0]), "float") is None  # already numeric
    assert parse_column(pd.Series(["a"]), "string") is None


def test_a_typed_frame_keeps_integers_whole_and_unparseable_values_null() -> None:
    frame = typed_frame(pd.DataFrame({"k": ["1545", "x", None], "s": ["a", "b", "c"]}),
                        {"k": "int", "s": "string"})
    assert str(frame["k"].dtype) == "Int64" and frame["k"].tolist()[0] == 1545
    assert frame["k"].isna().tolist() == [False, True, True] and frame["s"].tolist()[0] == "a"


def test_the_views_show_a_bad_value_as_it_arrived_and_values_as_parsed() -> None:
    rows = pd.DataFrame({"dep_delay": ["3", "12a", None], "origin": ["EWR", "JFK", "LGA"]})
    types, values, clean = check_views(rows, {"dep_delay": "int"}, ["dep_delay"],
                                       ["dep_delay", "origin"])
    assert types["dep_delay"].tolist() == [3, "12a", None]  # one bad value, named alone
    assert values["dep_delay"].iloc[0] == 3.0 and np.isnan(values["dep_delay"].iloc[1])
    assert clean == {}  # a column with a bad value has no clean dtype
    types, _, clean = check_views(rows.iloc[[0]], {"dep_delay": "int"}, ["dep_delay"], [])
    assert clean == {"dep_delay": "int64"} and types["dep_delay"].tolist() == [3]
