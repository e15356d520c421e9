"""The package structure holds: layers one way, no import cycles, small modules and functions.

The layers are declared once, as import-linter contracts in pyproject.toml (docs/ARCHITECTURE.md
explains them); these tests run the real ``lint-imports`` and show it catching a planted
upward import, so the contract cannot silently stop checking anything.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("etl", "training", "pipeline_ui")
CODE_DIRS = ("etl", "training", "dags", "plugins", "bench", "scripts")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 60  # modules sized by concept (issue 35)
LONG_MARK = "# long:"  # on the def line or the line above: why this one may be longer


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "plugins")])}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"),
                           "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_layers_contract_holds():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_layers_contract_fails_on_a_planted_upward_import(tmp_path):
    for name in ("etl", "training"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "examples"))
    shutil.copytree(REPO / "plugins", tmp_path / "plugins",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    paths = tmp_path / "etl" / "storage" / "paths.py"
    paths.write_text(paths.read_text() + "\nimport etl.pipeline.steps  # planted: storage -> pipeline\n")

    result = _lint_imports(tmp_path)

    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "etl.storage.paths -> etl.pipeline.steps" in result.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_import_cycles(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    # A package's __init__ re-exporting its modules is not a cycle a reader has to untangle.
    for module in sorted(graph.modules):
        for child in graph.find_children(module):
            if graph.direct_import_exists(importer=module, imported=child):
                graph.remove_import(importer=module, imported=child)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y"]]


def _code_files() -> list[Path]:
    """Our modules; hidden folders (e.g. bench/.peers, the peers' virtualenvs) are not ours."""
    return sorted(p for d in CODE_DIRS for p in (REPO / d).rglob("*.py")
                  if "__pycache__" not in p.parts
                  and not any(part.startswith(".") for part in p.relative_to(REPO).parts))


@pytest.mark.parametrize("path", _code_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_modules_and_functions_fit_on_a_screen(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_MODULE_LINES or LONG_MARK in lines[0], \
        f"{path.name}: {len(lines)} lines (split it, or say why on its first line)"
    long = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            marked = any(LONG_MARK in lines[i - 1] for i in (start - 1, node.lineno) if i >= 1)
            if node.end_lineno - start + 1 > MAX_FUNCTION_LINES and not marked:
                long.append(f"{node.name} (line {node.lineno}, {node.end_lineno - start + 1} lines)")
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_importing_the_etl_steps_imports_no_great_expectations():
    """Every ETL task body imports ``etl.pipeline``; GX (seconds of CPU, INFO chatter at
    import) belongs only to the steps that validate, imported after logging is set."""
    code = ("import sys; from etl import pipeline; "
            "assert 'great_expectations' not in sys.modules, 'GX imported'; "
            "assert callable(pipeline.build_version)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
