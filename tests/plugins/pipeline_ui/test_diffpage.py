"""The plugin's diff page (``pipeline_ui.diffpage``): linked from the version page and the
version list, it renders the ``etl.versions.diff`` result that ``python -m etl diff`` prints."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.ui_fixtures import write_version

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "plugins"))

from pipeline_ui.app import create_app

DS = "flights"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Three daily versions; the newest has more rows and a new carrier ("ZZ" for "UA")."""
    root = tmp_path_factory.mktemp("ui-diff")
    ids = [write_version(root, DS, datetime(2013, 1, 2, tzinfo=UTC), rows=900),
           write_version(root, DS, datetime(2013, 1, 3, tzinfo=UTC), rows=900),
           write_version(root, DS, datetime(2013, 1, 4, tzinfo=UTC), rows=1000, text="ZZ")]
    return root, ids


@pytest.fixture(scope="module")
def client(store: tuple[Path, list[str]]) -> TestClient:
    return TestClient(create_app(store[0].as_uri()))


def _diff_links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'class="diff-link" href="([^"]+)"', html)]


def _text(html: str) -> str:
    html = html.replace("<wbr>", "")
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def test_the_version_page_links_to_the_diff_with_the_previous_version(
        client: TestClient, store: tuple[Path, list[str]]) -> None:
    _, ids = store
    page = client.get(f"/datasets/{DS}/versions/{ids[2]}")
    (link,) = _diff_links(page.text)
    assert link == f"/datasets/{DS}/versions/{ids[2]}/diff"
    r = client.get(link)
    assert r.status_code == 200
    text = _text(r.text)
    assert f"What changed: {ids[1]} → {ids[2]}" in text
    labels = re.search(r'id="labels">.*?</table>', r.text, re.DOTALL).group(0)
    assert "693" in labels and "770" in labels  # 0.77 of 900 and of 1,000 rows
    vocab = _text(re.search(r'id="vocabularies">.*?</table>', r.text, re.DOTALL).group(0))
    assert "carrier 5 5 ZZ UA" in vocab  # new value ZZ, gone UA
    assert "Schema unchanged" in text and "0 kept, 0 added, 0 rebuilt, 0 dropped" in text
    assert not _diff_links(client.get(f"/datasets/{DS}/versions/{ids[0]}").text)  # the oldest


def test_the_version_list_links_every_version_but_the_oldest(
        client: TestClient, store: tuple[Path, list[str]]) -> None:
    _, ids = store
    links = _diff_links(client.get(f"/datasets/{DS}").text)
    assert links == [f"/datasets/{DS}/versions/{v}/diff" for v in (ids[2], ids[1])]
    assert all(client.get(u).status_code == 200 for u in links)


def test_against_picks_the_older_side_and_bad_names_are_named(
        client: TestClient, store: tuple[Path, list[str]]) -> None:
    _, ids = store
    r = client.get(f"/datasets/{DS}/versions/{ids[2]}/diff", params={"against": ids[0]})
    assert r.status_code == 200 and f"What changed: {ids[0]} → {ids[2]}" in _text(r.text)
    assert f'<option value="{ids[0]}" selected>' in r.text
    missing = client.get(f"/datasets/{DS}/versions/{ids[2]}/diff",
                         params={"against": "20990101T000000Z_all"})
    assert missing.status_code == 404 and "20990101T000000Z_all" in _text(missing.text)
    oldest = client.get(f"/datasets/{DS}/versions/{ids[0]}/diff")
    assert oldest.status_code == 404 and "is the oldest version" in _text(oldest.text)


def test_the_page_prints_each_figure_as_the_cli_does(tmp_path: Path) -> None:
    """Issue 41 item 5: one formatter for the page and ``etl diff`` (``-257,264`` in both, not
    ``-257264`` on the page), and the command's ``--dataset`` never wraps between its dashes."""
    import json

    from etl import versions
    from etl.versions import diff, diff_text

    year = write_version(tmp_path, DS, datetime(2014, 1, 1, tzinfo=UTC), rows=900)
    week = write_version(tmp_path, DS, datetime(2014, 1, 1, tzinfo=UTC),
                         datetime(2013, 12, 25, tzinfo=UTC), rows=900)
    for version, train in ((year, 262_077), (week, 4_813)):
        path = tmp_path / "datasets" / DS / version / "manifest.json"
        doc = json.loads(path.read_text())
        doc["splits"]["train"]["num_examples"] = train
        path.write_text(json.dumps(doc))
    html = TestClient(create_app(tmp_path.as_uri())).get(
        f"/datasets/{DS}/versions/{week}/diff", params={"against": year}).text
    rows = re.search(r'<section id="rows">.*?</section>', html, re.DOTALL).group(0)
    page = [_text(r).split() for r in re.findall(r"<tr><td>.*?</tr>", rows, re.DOTALL)]
    manifests = [versions.read_manifest((tmp_path / "datasets" / DS / v).as_uri())
                 for v in (year, week)]
    text = diff_text.format_diff(diff.diff_manifests(*manifests)).splitlines()
    cli = [line.split() for line in text[text.index("rows per split:") + 2:][:len(page)]]
    assert page == cli and ["train", "262,077", "4,813", "-257,264"] in page, (page, cli)
    assert '<span class="nowrap">--dataset</span>' in html
