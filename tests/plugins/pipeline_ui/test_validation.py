"""pipeline_ui.validation: GX's raw floats and kwargs JSON read as an operator reads them."""

from __future__ import annotations


def test_validation_rows_read_as_words_and_numbers() -> None:
    """Issue 29 item 7: GX's raw floats and kwargs JSON, as an operator reads them."""
    from pipeline_ui.validation import validation_view

    stored = {"results": [
        {"success": True, "expectation_config": {"type": "expect_column_mean_to_be_between",
         "kwargs": {"column": "distance", "min_value": 100, "max_value": 5000.5}},
         "result": {"observed_value": 1039.8759712255855}},
        {"success": True, "expectation_config": {"type": "expect_column_values_to_be_in_type_list",
         "kwargs": {"column": "year", "type_list": ["int", "int64"], "mostly": 0.99}},
         "result": {"element_count": 709, "unexpected_count": 0}},
        {"success": False, "expectation_config": {"type": "expect_column_stdev_to_be_between",
         "kwargs": {"column": "x", "min_value": 1e-3}},
         "result": {"observed_value": 9.403820305149712e-09}}]}
    rows = {r.columns: r for r in validation_view(stored).rows}
    assert (rows["distance"].details, rows["distance"].observed) == ("min 100; max 5,000.5", "1,039.9")
    assert rows["year"].details == "type one of int, int64; for at least 99% of rows"
    assert rows["year"].observed == "all 709 rows pass"
    assert rows["x"].observed == "9.404e-09"
