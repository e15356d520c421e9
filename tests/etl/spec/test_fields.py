"""etl.spec.fields: any file header gets a column identifier, deterministically."""

from __future__ import annotations

from etl.spec.fields import check_name, column_identifiers


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
