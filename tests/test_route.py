"""The route is what runs: docs/ARCHITECTURE.md's route lists every project module that one
flights ``etl run`` and ``training train`` execute, and nothing else, ordered by stage, one line
each, within a budget.

The modules are found by running both commands under a profile hook (``tests.support.trace``),
so the route cannot drift from the code: a module added to the path fails this test until the
page names it, and a module the page names but nothing runs fails it too. The infrastructure every
step uses (storage, logging, errors) is named once on the page and not listed.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ARCHITECTURE.md"
ROUTE_HEADING = "## The route from raw file to model"
MAX_MODULES = 46  # issue 40: what a newcomer must read to follow one row, infrastructure aside
# (47: issue 54 cut training.config at its seams: the run's record, metrics.json, and the
# settings chosen from the data are modules of their own; the lines to read did not grow;
# 51: current.json, the drift report, publish()'s and train()'s results are typed records;
# issue 54 wants <= 45, so modules merge back where one concept was split in two:
# 50: current.json's record, Current, beside its writer in training/judge/current.py;
# 49: what train() returns, Trained and its Handover, beside the record and verdict it holds
# in training/record.py;
# 48: each task's head and target transform, the output end of the model both families
# share, in training/models/tabular.py beside its views, lookups and export;
# 47: what publish() returns, PublishedVersion, in etl/versions/catalog.py beside publishing;
# 46: the settings chosen from the train size and the target and family chosen on fits, one
# module of decisions made on the data, training/run/choice.py)
ENTRY = re.compile(r"^(\d+)\. `([^`]+)`: \S")


def route_of(text: str) -> tuple[list[str], list[str]]:
    """(the route's entries in order, the infrastructure patterns named once) of the page.

    The route is the numbered list under ``ROUTE_HEADING``, one ``N. `path`: what`` line per
    entry; the infrastructure is every backticked pattern on the paragraph line that says so
    ("the infrastructure ... named once").
    """
    section = text.split(ROUTE_HEADING, 1)[1].split("\n## ", 1)[0]
    entries, numbers, infra = [], [], []
    paragraph = section.split("\n1. ", 1)[0]
    flat = paragraph.replace("\n", " ")
    if "named once" in flat:  # the patterns follow the words, up to the paragraph's end
        infra = re.findall(r"`([^`]+)`", flat.split("named once", 1)[1].split("  ")[0])
    for line in section.splitlines():
        if m := ENTRY.match(line):
            numbers.append(int(m.group(1)))
            entries.append(m.group(2))
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"{DOC.name}: the route's entries are numbered {numbers}, expected 1..n")
    return entries, infra


def counts(path: str, how: str, repo: Path = REPO) -> bool:
    """Whether an executed module is one a reader must open: any module but an ``__init__.py``
    that only gathers names (imports, ``__all__``, a docstring); one that defines a function
    that ran, or runs a statement of its own at import, counts."""
    if Path(path).name != "__init__.py" or how == "call":
        return True
    tree = ast.parse((repo / path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                             ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and all(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            continue
        return True
    return False


def compare(executed: dict[str, str], entries: list[str], infra: list[str],
            repo: Path = REPO) -> dict[str, list[str]]:
    """What the page gets wrong: modules that ran but are not on the route, modules on the route
    that did not run, and the counted modules (for the budget)."""
    def infrastructure(path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in infra)

    ran = sorted(p for p, how in executed.items()
                 if not infrastructure(p) and counts(p, how, repo))
    listed = [e for e in entries if e.endswith(".py")]
    return {"omitted": [p for p in ran if p not in listed],
            "not_run": [p for p in listed if p not in ran],
            "counted": ran}


def _trace(out: Path, env: dict[str, str], *command: str) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "tests.support.trace", str(out), "--", *command],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(line.split("\t") for line in out.read_text().splitlines() if line)


@pytest.mark.e2e
def test_the_route_is_what_a_flights_run_and_its_training_execute(tmp_path):
    env = {**os.environ, "PIPELINE_STORAGE_ROOT": f"file://{tmp_path / 'data'}",
           "PYTHONPATH": str(REPO)}
    land = subprocess.run([sys.executable, "-m", "etl", "land", "--dataset", "flights",
                           "--start-day", "2013-01-01", "--end-day", "2013-01-08"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert land.returncode == 0, land.stderr[-3000:]
    executed = _trace(tmp_path / "etl.txt", env, "etl", "run", "--dataset", "flights",
                      "--interval-end", "2013-01-08")
    # both families on a small budget (docs/TRAINING.md): the route is which modules run, not
    # for how many optimizer steps (64, not the budget chosen from the train size) or boosting
    # rounds (50, not up to 3,000)
    for path, how in _trace(tmp_path / "train.txt", env, "training", "train", "--dataset",
                            "flights", "--version", "latest", "--step-budget", "64",
                            "--max-rounds", "50").items():
        executed[path] = "call" if "call" in (how, executed.get(path)) else how
    entries, infra = route_of(DOC.read_text(encoding="utf-8"))

    found = compare(executed, entries, infra)

    assert not [p for p in executed if "/images/" in p], "a tabular run executed images code"
    assert found["omitted"] == [], f"{DOC.name}'s route omits modules that ran: {found}"
    assert found["not_run"] == [], f"{DOC.name}'s route lists modules that did not run: {found}"
    assert len(found["counted"]) <= MAX_MODULES, found["counted"]


def test_the_route_check_fails_on_an_omitted_module_and_a_stale_one(tmp_path):
    """The check is not vacuous: a page that leaves out a module that ran, or names one that
    did not, is caught; infrastructure and name-gathering ``__init__`` files are not counted."""
    pkg = tmp_path / "etl" / "kinds"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Names."""\nfrom etl.kinds.x import y\n__all__ = ["y"]\n')
    (tmp_path / "etl" / "__init__.py").write_text("import etl.log_redaction\nsetup()\n")
    page = (f"{ROUTE_HEADING}\n\nThe infrastructure every step uses is named once here and not "
            "listed: `etl/storage/*`, `etl/logs.py`.\n\n1. `docs/ARCHITECTURE.md`: this page\n"
            "2. `etl/__init__.py`: setup\n3. `etl/pipeline/chain.py`: the chain\n"
            "4. `etl/gone.py`: stale\n")
    entries, infra = route_of(page)
    executed = {"etl/__init__.py": "import", "etl/kinds/__init__.py": "import",
                "etl/pipeline/chain.py": "call", "etl/segments/plan.py": "call",
                "etl/storage/io.py": "call", "etl/logs.py": "call"}

    found = compare(executed, entries, infra, tmp_path)

    assert infra == ["etl/storage/*", "etl/logs.py"]
    assert found == {"omitted": ["etl/segments/plan.py"], "not_run": ["etl/gone.py"],
                     "counted": ["etl/__init__.py", "etl/pipeline/chain.py",
                                 "etl/segments/plan.py"]}
    with pytest.raises(ValueError, match="numbered"):
        route_of(page.replace("3. `etl/pipeline", "5. `etl/pipeline"))
