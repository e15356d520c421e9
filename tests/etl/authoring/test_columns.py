"""``etl.authoring.columns``: what a draft declares of each column, starting from the identifier
it gives any file header, deterministically. (Types, nulls, ranges and keys drafted from every
row: ``test_cli.py`` and ``test_profile.py``.)"""

from __future__ import annotations

from etl.authoring.columns import column_identifiers
from etl.spec.model import check_name


def test_column_identifiers_for_any_header() -> None:
    headers = ["Ship Mode", "Sub-Category", "a.b", "2nd", "Größe", "class", "Price", "price",
               "a-b", "", "Café Latte", "type"]
    got = column_identifiers(headers)
    assert got == {"Ship Mode": "ship_mode", "Sub-Category": "sub_category", "a.b": "a_b",
                   "2nd": "c_2nd", "Größe": "grosse", "class": "class_", "Price": "price",
                   "price": "price_2", "a-b": "a_b_2", "": "column_10",
                   "Café Latte": "cafe_latte", "type": "type_"}
    assert all(check_name(v, "t") for v in got.values())
    assert column_identifiers(headers) == got  # deterministic
