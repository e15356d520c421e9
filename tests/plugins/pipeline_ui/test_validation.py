"""pipeline_ui.validation: GX's raw floats and kwargs JSON read as an operator reads them; each
check in a sentence; the page of a version whose validation failed (issue 51), on what the real
ETL leaves when a window's joined weather is missing."""

from __future__ import annotations

import re
from html import unescape

import pytest


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


def test_each_check_reads_as_a_sentence() -> None:
    """Issue 51 item 6: a failed expectation in plain words, with what was observed."""
    from pipeline_ui.validation import in_words

    assert in_words("expect_column_proportion_of_non_null_values_to_be_between",
                    {"column": "temp", "min_value": 0.5}, {"observed_value": 0.0}) == \
        "temp must have a value in at least 50% of rows; 0% of rows had one"
    assert in_words("expect_column_values_to_not_be_null", {"column": "carrier", "mostly": 0.99},
                    {"unexpected_count": 12, "element_count": 1000}) == \
        "carrier must have a value in at least 99% of rows; 12 of 1,000 rows did not"
    assert in_words("expect_column_values_to_be_between",
                    {"column": "distance", "min_value": 1, "max_value": 5000},
                    {"unexpected_count": 0, "element_count": 10}) == \
        "distance must lie between 1 and 5,000 in every row; all did"
    assert in_words("expect_table_row_count_to_be_between", {"min_value": 1},
                    {"observed_value": 0}) == "the window must hold at least 1 rows; it held 0"
    assert in_words("expect_compound_columns_to_be_unique",
                    {"column_list": ["time_hour", "flight"]},
                    {"unexpected_count": 2, "element_count": 9}) == \
        "each combination of time_hour, flight must appear once; 2 of 9 rows did not"
    assert in_words("expect_column_mean_to_be_between", {"column": "x", "max_value": 3},
                    {"observed_value": 4.5}) == "the mean of x must lie at most 3; observed 4.5"
    assert in_words("expect_column_values_to_be_valid_hhmm", {"column": "t"}, {}, "boom") == \
        "t must be a time of day written HHMM in every row; the check could not run: boom"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")))).strip()


def test_a_failed_validation_opens_marked_not_published(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 51 item 6, on what the real ETL left when a window's weather was missing: the page
    opens (it 404ed), marked not published, the failure in words with the join that caused it,
    linked from the dataset page; the version page stays a 404 (nothing was published)."""
    from fastapi.testclient import TestClient
    from pipeline_ui.app import create_app

    from tests.support import failed_validation as fv

    client = TestClient(create_app(fv.failed_root(tmp_path_factory).as_uri()))
    page = client.get(f"/datasets/flights/versions/{fv.VERSION}/validation")
    assert page.status_code == 200, page.text
    html, text = page.text, _text(page.text)
    assert '<span class="badge bad not-published">not published</span>' in html
    assert f"Not published: this window failed its validation, so no manifest was written for " \
        f"{fv.VERSION}" in text
    [failure] = re.findall(r'<li class="failure">(.*?)</li>', html, re.DOTALL)
    assert _text(failure) == (
        "temp must have a value in at least 50% of rows; 0% of rows had one because no weather "
        "rows joined for 2013-01-05: the joined source weather ends on 2013-01-04")
    assert "the joined source <code>weather</code> ends on 2013-01-04" in failure
    assert "Rows evaluated 768" in text  # from the results, there is no manifest
    raw = re.search(r'class="raw-link" href="([^"]+)"', html).group(1)
    assert client.get(raw).json()["success"] is False
    assert client.get(f"/datasets/flights/versions/{fv.VERSION}").status_code == 404

    dataset = client.get("/datasets/flights").text
    [row] = re.findall(r'<tr class="unpublished-row"[^>]*>(.*?)</tr>', dataset, re.DOTALL)
    assert f'href="/datasets/flights/versions/{fv.VERSION}/validation"' in row
    assert "not published" in row and "1 of 65 expectations failed" in _text(row)
    assert "ends on 2013-01-04" in _text(row)
    assert "No version yet" in dataset  # and none is claimed


def test_a_version_never_judged_still_has_no_validation_page(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from fastapi.testclient import TestClient
    from pipeline_ui.app import create_app

    from tests.support import failed_validation as fv

    root = fv.failed_root(tmp_path_factory)
    half = "20130107T000000Z_20130106T000000Z"
    (root / "datasets" / "flights" / half).mkdir()  # a build killed before judging
    page = TestClient(create_app(root.as_uri())).get(
        f"/datasets/flights/versions/{half}/validation")
    assert page.status_code == 404 and "is not complete (no manifest.json)" in page.text
