"""pipeline_ui.present: metrics, sizes and stored Markdown as the pages show them."""

from __future__ import annotations

from pipeline_ui import present


def test_metrics_read_with_four_significant_digits() -> None:
    assert [present.metric(v) for v in (0.8, 0.76743, 1.0, 0.0, 13.1, 1234.6, 2e-5, 3)] == [
        "0.8000", "0.7674", "1.000", "0.000", "13.10", "1235", "2.000e-05", "3"]


def test_markdown_is_rendered_safely() -> None:
    html = present.render_markdown(
        "# T\n<script>x()</script>\n\n[a](javascript:alert(1)) ![p](p.png) ![q](https://e/q.png)",
        image_url=lambda p: f"/files/{p}")
    assert "<h1>T</h1>" in html and "&lt;script&gt;" in html and "<script" not in html
    assert 'href="javascript' not in html
    assert 'src="/files/p.png"' in html and 'src="https://e/q.png"' in html


def test_ids_wrap_only_between_pieces_never_inside_a_number() -> None:
    """Issue 41 item 8: a run id wrapped mid-number ("…T14:4" / "0:43…"); it may now wrap only
    after "_", before a date-time's time and before its offset, and is never cut anywhere."""
    run = "manual__2026-11-27T14:40:43.123456+00:00"
    html = str(present.breakable(run))
    assert html == ('<span class="id pieces">manual_<wbr>_<wbr>2026-11-27<wbr>T14:40:43.123456'
                    '<wbr>+00:00</span>'), html
    assert str(present.breakable("20140101T000000Z_20131225T000000Z")).count("<wbr>") == 1
    assert "&lt;b&gt;" in str(present.breakable("<b>_x"))  # escaped


def test_a_timestamp_wraps_between_its_date_and_time_never_inside_either() -> None:
    """A narrow column (the dataset page at 1280 px inside Airflow's frame) may put the time
    under the date; Chrome would break a date after its hyphens, so each half is kept whole."""
    from pipeline_ui.present import when_span

    html = str(when_span("2013-12-25T00:00:00+00:00"))
    assert html == ('<span class="when-pair"><span class="when">2013-12-25</span> '
                    '<span class="when">00:00 UTC</span></span>')
    assert str(when_span("not a date")) == '<span class="when">not a date</span>'
    assert str(when_span(None)) == f'<span class="when">{present.fmt(None)}</span>'
