"""The README is a front page and every relative link in it and in docs/*.md lands somewhere.

The reference moved from the README to docs/ pages (issue 40); links between them, and the
anchors tests and scripts point readers to, break silently when a heading is renamed or a
section moves again. This checks every relative Markdown link (a file that exists; for
``#anchor``, a heading of that file by GitHub's anchor rules) and keeps the README short.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 300
FIRST_SCREEN_LINES = 60  # the two set-up commands must be on the first screen

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1)(?!\n\s*\n).)+?\1", re.DOTALL)  # not across paragraphs
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks: links and headings in code are text."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match and (fence is None or match.group(1) == fence):
            fence = None if fence else match.group(1)
            continue
        if fence is None:
            out.append((number, line))
    return out


def _prose(text: str) -> str:
    """The text with fenced blocks blanked and code spans replaced by a word, line numbers
    kept: a link's text may run over two lines, a link inside code is not one."""
    lines = [""] * len(text.splitlines())
    for number, line in _prose_lines(text):
        lines[number - 1] = line
    return CODE_SPAN.sub(lambda m: "code" + "\n" * m.group(0).count("\n"), "\n".join(lines))


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: its rendered text, lowercased, punctuation other than
    ``-`` and ``_`` dropped, spaces turned into ``-`` (duplicates are numbered by the caller)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<!\w)_(.+?)_(?!\w)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown file defines: its headings' ids and explicit HTML anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in _prose_lines(text):
        out.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = github_anchor(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link or image outside code."""
    prose = _prose(text)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(prose)]


def broken_links(root: Path) -> list[str]:
    """``file:line: target (why)`` for each relative link of README.md and docs/*.md whose
    file does not exist under ``root`` or whose ``#anchor`` is no heading of that file."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for number, target in links(page.read_text(encoding="utf-8")):
            if SCHEME.match(target) or target.startswith("/"):
                continue  # a web address (or a site-absolute one): not a file of this tree
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(
                    dest.read_text(encoding="utf-8"))):
                broken.append(f"{where} (no heading #{anchor} in {dest.name})")
    return broken


def test_every_relative_link_resolves() -> None:
    assert broken_links(REPO) == []


def test_the_readme_is_a_front_page_linking_every_docs_page() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    first_screen = "\n".join(lines[:FIRST_SCREEN_LINES])
    assert "make demo" in first_screen and "make test" in first_screen
    linked = {target.partition("#")[0] for _, target in links("\n".join(lines))}
    pages = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert pages - linked == set(), "docs pages the README does not link"


def test_github_anchor_rules() -> None:
    assert github_anchor("Params (the trigger form)") == "params-the-trigger-form"
    assert github_anchor("make compose-test") == "make-compose-test"
    assert github_anchor("`make compose-test`: the **real** stack") == (
        "make-compose-test-the-real-stack")
    assert github_anchor("etl.spec.folders, PIPELINE_SPECS_PATH") == (
        "etlspecfolders-pipeline_specs_path")
    assert anchors("# Tests\n```\n# not a heading\n```\n## Tests\n") == {"tests", "tests-1"}


def test_a_planted_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    """A copy of the pages (the rest of the tree linked in) with three bad links planted, one of
    them over two lines, beside two in code that are not links."""
    for entry in REPO.iterdir():
        if entry.name not in ("README.md", "docs"):
            (tmp_path / entry.name).symlink_to(entry)
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    assert broken_links(tmp_path) == []
    readme_end = len((tmp_path / "README.md").read_text(encoding="utf-8").splitlines())
    ui_end = len((REPO / "docs" / "UI.md").read_text(encoding="utf-8").splitlines())
    with (tmp_path / "README.md").open("a", encoding="utf-8") as readme:
        readme.write("\nSee [gone](docs/GONE.md) and [moved\nsection](docs/AIRFLOW.md#no-such),"
                     " not `[code](docs/IGNORED.md)`.\n\n```\n[fenced](docs/IGNORED.md)\n```\n")
    with (tmp_path / "docs" / "UI.md").open("a", encoding="utf-8") as page:
        page.write("\n[back](../README.md#what-the-demo-did)\n")

    readme, ui = f"README.md:{readme_end + 2}: ", f"docs/UI.md:{ui_end + 2}: "
    assert broken_links(tmp_path) == [
        readme + "docs/GONE.md (no such file)",
        readme + "docs/AIRFLOW.md#no-such (no heading #no-such in AIRFLOW.md)",
        ui + "../README.md#what-the-demo-did (no heading #what-the-demo-did in README.md)",
    ]


def test_the_first_ui_run_unpauses_every_dag_it_needs_and_ends_on_predictions() -> None:
    """Issue 51 item 7: the README's first UI run produced no predictions, `score_flights`
    staying paused (every DAG starts paused) with nothing saying so. Its steps, and the
    demo's last line that points to them, unpause both consumers of the publish."""
    import sys

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## The first UI run", 1)[1].split("\n## ", 1)[0]
    first = section.split("\n1. ", 1)[1].split("\n2. ", 1)[0]
    assert "Unpause `train_flights` and `score_flights`" in first, first
    assert "**Predictions page**" in section and "`score` task" in section
    sys.path.insert(0, str(REPO / "scripts"))
    import demo

    assert "unpause train_flights and score_flights" in demo.FIRST_UI_RUN
    assert demo.FIRST_UI_RUN in text  # the README's copy of what the demo prints
