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
