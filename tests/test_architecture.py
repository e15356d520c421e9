"""The package structure holds: layers one way, no import cycles, small modules and functions,
and every module's tests where a reader looks for them.

The layers are declared once, as import-linter contracts in pyproject.toml (docs/ARCHITECTURE.md
explains them); these tests run the real ``lint-imports`` and show it catching a planted
upward import, so the contract cannot silently stop checking anything. The tests mirror the code
(``etl/segments/build.py`` -> ``tests/etl/segments/test_build.py``); the few modules tested
elsewhere are listed, each with its reason, in tests/MIRROR.md, and a planted module without a
test is shown failing the same way.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("etl", "training", "pipeline_ui", "bench", "flightpipe_dags")
CODE_DIRS = ("etl", "training", "dags", "plugins", "bench", "scripts")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60  # modules sized by concept (issues 35, 54)
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
    paths.write_text(paths.read_text() + "\nimport etl.pipeline.chain  # planted: storage -> pipeline\n")
    shutil.copytree(REPO / "bench", tmp_path / "bench",
                    ignore=shutil.ignore_patterns("__pycache__", ".*"))

    result = _lint_imports(tmp_path)

    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "etl.storage.paths -> etl.pipeline.chain" in result.stdout


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
    monkeypatch.syspath_prepend(str(REPO / "dags"))
    monkeypatch.syspath_prepend(str(REPO))
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


# --- tests mirror the code ----------------------------------------------------------------------

MIRRORED = ("etl", "training", "bench", "plugins", "dags")  # code folders whose tests mirror them
MIRROR_LIST = Path("tests") / "MIRROR.md"  # the modules tested elsewhere, one line of reason each


def _ours(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return "__pycache__" not in parts and not any(part.startswith(".") for part in parts)


def mirrored_test(module: Path) -> Path:
    """``etl/segments/build.py`` -> ``tests/etl/segments/test_build.py`` (``__main__.py`` ->
    ``test_main.py``)."""
    return Path("tests") / module.parent / f"test_{module.stem.strip('_')}.py"


def listed_elsewhere(root: Path) -> dict[str, str]:
    """tests/MIRROR.md's table: module path -> why its tests are not at the mirrored path."""
    rows = {}
    for line in (root / MIRROR_LIST).read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0].endswith(".py"):
            rows[cells[0]] = cells[1]
    return rows


def mirror_gaps(root: Path) -> list[str]:
    """Every module of ``MIRRORED`` has its test file at the mirrored path or a line in
    tests/MIRROR.md (not both, and no line for a module that is gone); every test folder under
    tests/<code folder>/ mirrors a package that exists."""
    listed = listed_elsewhere(root)
    gaps = []
    modules = sorted(p.relative_to(root) for d in MIRRORED for p in (root / d).rglob("*.py")
                     if _ours(p, root) and p.name != "__init__.py")
    for module in modules:
        test, reason = mirrored_test(module), listed.pop(module.as_posix(), None)
        if not (root / test).exists() and reason is None:
            gaps.append(f"{module}: no test at {test} (or a line saying why in {MIRROR_LIST})")
        elif (root / test).exists() and reason is not None:
            gaps.append(f"{module}: has {test}; drop its line from {MIRROR_LIST}")
    gaps += [f"{MIRROR_LIST}: lists {name}, which is not a module" for name in sorted(listed)]
    for folder in sorted(p for d in MIRRORED for p in (root / "tests" / d).rglob("*")
                         if p.is_dir() and _ours(p, root)):
        code = folder.relative_to(root / "tests")
        if not (root / code).is_dir():
            gaps.append(f"{folder.relative_to(root)}: mirrors no code folder ({code} is absent)")
    return gaps


def test_tests_mirror_the_code():
    assert mirror_gaps(REPO) == []


def test_mirror_check_fails_on_a_planted_module_without_a_test(tmp_path):
    for path in [p for d in (*MIRRORED, "tests") for p in (REPO / d).rglob("*.py")
                 if _ours(p, REPO)] + [REPO / MIRROR_LIST]:
        (tmp_path / path.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, tmp_path / path.relative_to(REPO))
    assert mirror_gaps(tmp_path) == []
    (tmp_path / "etl" / "segments" / "planted.py").write_text('"""Planted: no test."""\n')

    assert mirror_gaps(tmp_path) == [(
        "etl/segments/planted.py: no test at tests/etl/segments/test_planted.py "
        "(or a line saying why in tests/MIRROR.md)")]


# ---- the records are read through their types, never by string key -------------------------
# manifest.json and segment.json (with their schema and statistics blocks), metrics.json (with
# its figures, verdict, choices, tuned settings and phases)

TYPES_MODULES = {"etl/versions/manifest.py", "etl/versions/segment.py", "training/record.py",
                 # issue 54: the drift report (current.json's Current is in
                 # training/judge/current.py, scanned with its writer; what train() returns,
                 # Trained and Handover, in training/record.py; what publish() returns,
                 # PublishedVersion, in etl/versions/catalog.py, scanned with publishing)
                 "etl/drift_report.py",
                 # issue 54: a segment's split statistics partial (the record beside its code)
                 "etl/statistics.py"}


def _json_keys() -> dict[str, frozenset[str]]:
    """What a name suggests it holds -> the JSON keys its type reads (from the types)."""
    import dataclasses

    from etl.jsonobject import json_key
    from etl.versions import manifest, segment
    from training import record

    def keys(*types: type) -> frozenset[str]:
        return frozenset(json_key(f) for t in types for f in dataclasses.fields(t)
                         if not f.name.startswith("json_"))

    whole = keys(manifest.Manifest, segment.SegmentMeta, manifest.SegmentEntry)
    return {"whole": whole, "split": keys(segment.SplitInfo), "shard": keys(segment.Shard),
            "schema": keys(segment.Schema), "label": keys(segment.LabelSchema),
            "feature": keys(segment.FeatureSchema), "statistics": keys(segment.Statistics),
            "moments": keys(segment.Moments), "model": keys(record.ModelRecord),
            **_record_block_keys(keys), **_record_json_keys()}


def _record_block_keys(keys) -> dict[str, frozenset[str]]:
    """metrics.json's blocks: what a name suggests it holds -> the keys its type reads."""
    from training import record

    return {"figures": keys(record.Figures), "intervals": keys(record.Intervals),
            "blessing": keys(record.Blessing), "check": keys(record.Check),
            "cross_validation": keys(record.CrossValidation), "refit": keys(record.FoldRefit),
            "target_choice": keys(record.TargetChoice),
            "family_choice": keys(record.FamilyChoice),
            "choice": keys(record.TargetChoice, record.FamilyChoice),
            "tuned": keys(record.TunedUse), "phases": keys(record.PhaseTimes),
            "phase": keys(record.PhaseTime)}


# a metrics.json block -> the names its readers give it (an attribute's name counts too)
_RECORD_BLOCK_NAMES = {
    "figures": ("test", "eval", "baseline", "figures", "out_of_fold"),
    "intervals": ("intervals", "ci"), "blessing": ("blessing",), "check": ("check",),
    "cross_validation": ("cross_validation",), "refit": ("refit",),
    "target_choice": ("target_choice",), "family_choice": ("family_choice",),
    "choice": ("choice",), "tuned": ("tuned",), "phases": ("phases",), "phase": ("phase",)}


def _holds(name: str) -> str | None:
    """Which typed object a variable's name says it holds (the names the readers use)."""
    low = name.lower()
    if kind := _holds_record(low):
        return kind
    if "manifest" in low or low in ("meta", "metas", "m", "ma", "mb", "first", "last") \
            or low.startswith(("seg", "meta_")):
        return "whole"
    if low in ("info", "split", "split_info"):
        return "split"
    if low in ("shard", "shards"):
        return "shard"
    if low == "schema" or low.endswith("_schema") and low != "label_schema":
        return "schema"  # a version's label as etl.spec resolves it is the spec's dict
    if low == "label":
        return "label"
    if low in ("feat", "feature", "features"):
        return "feature"
    if low in ("stats", "statistics") or low.endswith(("_stats", "_statistics")):
        return "statistics"
    if low in ("moments", "numeric_stats"):
        return "moments"
    if low in ("metrics", "record", "model_record"):
        return "model"
    return next((kind for kind, names in _RECORD_BLOCK_NAMES.items() if low in names), None)


def _record_json_keys() -> dict[str, frozenset[str]]:
    """Issue 54's records: current.json, a drift report (and its rows), publish()'s and
    train()'s results, a segment's statistics partial (by split name, then its split's keys)
    -> the JSON keys each type reads."""
    import dataclasses

    from etl.drift_report import DriftReport, DriftRow
    from etl.jsonobject import json_key
    from etl.spec.model import Split
    from etl.statistics import SplitPartial
    from etl.versions.catalog import PublishedVersion
    from training.judge.current import Current
    from training.record import Handover, Trained

    def keys(*types: type) -> frozenset[str]:
        return frozenset(json_key(f) for t in types for f in dataclasses.fields(t)
                         if not f.name.startswith("json_"))

    return {"current": keys(Current), "drift": keys(DriftReport), "drift_row": keys(DriftRow),
            "published": keys(PublishedVersion), "trained": keys(Trained),
            "handover": keys(Handover),
            "statistics_partial": keys(SplitPartial) | {s for s, _ in Split().fractions},
            "split_partial": keys(SplitPartial)}


def _holds_record(low: str) -> str | None:
    """Which of issue 54's records a (lower-cased) name says it holds."""
    if low in ("current", "pointer", "current_model"):
        return "current"
    if low in ("drift", "drift_report", "report"):
        return "drift"
    if low in ("drift_row", "drift_rows"):
        return "drift_row"
    if low in ("published", "publish_result"):
        return "published"
    if low in ("trained", "train_result", "train_results"):
        return "trained"
    if low in ("handover", "handed", "summary"):  # the train task's XCom
        return "handover"
    if low in ("statistics_partial", "partial", "partials"):
        return "statistics_partial"
    if low in ("part", "split_partial"):
        return "split_partial"
    return None


def string_key_reads(source: str, keys: dict[str, frozenset[str]]) -> list[str]:
    """``x["splits"]`` / ``x.get("content_hash")`` where ``x``'s name says it is a manifest,
    a segment.json, a split or a shard entry and the key is one its type holds."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args:
            target, key = node.func.value, node.args[0]
        else:
            continue
        if isinstance(target, ast.BoolOp):  # ``(manifest.schema or {})["key"]``: the first
            target = target.values[0]
        name = target.id if isinstance(target, ast.Name) else \
            target.attr if isinstance(target, ast.Attribute) else None
        kind = _holds(name) if name else None
        if kind and isinstance(key, ast.Constant) and key.value in keys[kind]:
            found.append((node.lineno, node.col_offset, f"line {node.lineno}: {ast.unparse(node)}"))
    return [text for *_, text in sorted(found)]


_TEMPLATE_RECORDS = ("manifest", "validation", "split", "summary", "metrics", "record",
                     *(name for names in _RECORD_BLOCK_NAMES.values() for name in names))


def _template_reads(text: str) -> list[str]:
    names = "|".join(_TEMPLATE_RECORDS)
    return [line.strip() for line in text.splitlines()
            if re.search(rf"\b({names})(\.get\(|\[')", line)]


def test_manifest_and_segment_json_are_read_through_their_types():
    keys = _json_keys()
    bad, scanned = {}, 0
    for path in _code_files():
        rel = str(path.relative_to(REPO))
        if rel in TYPES_MODULES:
            continue
        scanned += 1
        if found := string_key_reads(path.read_text(encoding="utf-8"), keys):
            bad[rel] = found
    for path in sorted((REPO / "plugins" / "pipeline_ui" / "templates").glob("*.html")):
        if found := _template_reads(path.read_text(encoding="utf-8")):
            bad[str(path.relative_to(REPO))] = found
    assert scanned > 100  # the whole tree, not an empty glob
    assert bad == {}, "read these through Manifest / SegmentMeta / Schema / Statistics / " \
        "ModelRecord and its blocks (Figures, Blessing, ...), and issue 54's Current / " \
        "DriftReport / PublishedVersion / Trained, not by string key: " + repr(bad)


def test_the_string_key_check_catches_a_planted_read():
    """The check above is not vacuous: each kind of planted read is caught -- a manifest's or
    segment's, their schema's (label, features) and statistics', a model record's and each of
    its blocks', a segment's statistics partial and its splits' --; typed reads, writes and
    look-alikes (a spec's ``key``, a writer's entry, a Keras history, a tuning step's result)
    are not."""
    keys = _json_keys()
    planted = '''
def f(manifest, meta, seg, info, shard, spec, e, schema, stats, metrics, label, feat, counts):
    a = manifest["splits"]
    b = meta.get("statistics_partial")
    c = seg["partitions"]
    d = info["num_examples"]
    g = shard.get("sha256")
    h = self.manifest["version"]
    i = manifest.schema["label"]
    j = label.get("names")
    k = feat["dtype"]
    l = manifest.statistics.get("label_counts")
    m = stats["numeric"]["distance"]
    n = metrics["test"]
    o = metrics.get("run_id")
    p = (manifest.schema or {}).get("features", {})
    stats["numeric"] = {}
    q = metrics.test["auc"]
    r = record.eval.get("loss")
    s = baseline["majority_class"]
    t = out_of_fold.get("accuracy")
    u = test["intervals"]["lead_over_baseline"]
    v = ci.get("metrics")
    w = metrics.blessing["blessed"]
    x = check["passed"]
    y = record.cross_validation.get("out_of_fold")
    z = refit["length"]
    aa = record.target_choice["why"]
    ab = metrics.family_choice.get("chosen")
    ac = choice["why"]
    ad = record.tuned["settings"]
    ae = record.phases["fit"]
    af = phase.get("seconds")
    ag = meta.statistics_partial.get("train")
    ah = partial["eval"]
    ai = part["rows"]
    aj = split_partial.get("nulls")
    ok = (part.rows, partial.split("train").labels, manifest.splits, meta.split("train").content_hash, spec["key"], e["file"],
          manifest.schema.label.name, info.num_examples, stats.numeric["distance"].mean,
          metrics.test.auc, counts["label_counts"], schema.features["x"].dtype,
          record.test.value(name), record.blessing.blessed, record.phases.fit.seconds,
          history["loss"], tuned["ok"], record.test.intervals.metrics["auc"])
'''
    found = string_key_reads(planted, keys)
    assert [f.split(": ", 1)[1] for f in found] == [
        "manifest['splits']", "meta.get('statistics_partial')", "seg['partitions']",
        "info['num_examples']", "shard.get('sha256')", "self.manifest['version']",
        "manifest.schema['label']", "label.get('names')", "feat['dtype']",
        "manifest.statistics.get('label_counts')", "stats['numeric']", "metrics['test']",
        "metrics.get('run_id')", "(manifest.schema or {}).get('features', {})",
        "metrics.test['auc']", "record.eval.get('loss')", "baseline['majority_class']",
        "out_of_fold.get('accuracy')", "test['intervals']", "ci.get('metrics')",
        "metrics.blessing['blessed']", "check['passed']",
        "record.cross_validation.get('out_of_fold')", "refit['length']",
        "record.target_choice['why']", "metrics.family_choice.get('chosen')", "choice['why']",
        "record.tuned['settings']", "record.phases['fit']", "phase.get('seconds')",
        "meta.statistics_partial.get('train')", "partial['eval']", "part['rows']",
        "split_partial.get('nulls')"]
    assert _template_reads("{{ manifest.get('splits') }}\n{{ manifest.splits }}\n"
                           "{{ record.blessing.get('blessed') }}\n{{ blessing.blessed }}\n"
                           "{{ detail.metrics.cross_validation['refit'] }}") == [
        "{{ manifest.get('splits') }}", "{{ record.blessing.get('blessed') }}",
        "{{ detail.metrics.cross_validation['refit'] }}"]


def _record_template_reads(text: str) -> list[str]:
    """Issue 54: a drift report or current.json read by key in a template."""
    return [line.strip() for line in text.splitlines()
            if re.search(r"\b(drift|current)(\.get\(|\[')", line)]


def test_the_issue_54_records_are_read_through_their_types_in_templates():
    bad = {str(p.relative_to(REPO)): found
           for p in sorted((REPO / "plugins" / "pipeline_ui" / "templates").glob("*.html"))
           if (found := _record_template_reads(p.read_text(encoding="utf-8")))}
    assert bad == {}, "read these through DriftReport / Current: " + repr(bad)


def test_the_string_key_check_catches_a_planted_read_of_the_issue_54_records():
    """current.json, a drift report and its rows, publish()'s and train()'s results: a read
    by key of each is caught; attribute reads, and keys their types do not hold, are not."""
    keys = _json_keys()
    planted = '''
def f(current, pointer, drift, report, drift_row, published, trained, resolved, handed):
    a = current["model_uri"]
    b = pointer.get("run")
    c = drift["drifted"]
    d = manifest.verdict.drift.get("against")
    e = report["history"]
    g = drift_row["kind"]
    h = published["version_uri"]
    i = self.published.get("created", True)
    j = trained["metrics"]["version"]
    k = trained.get("promoted")
    m = handed["promoted"]
    ok = (current.model_uri, drift.drifted, report.words(), published.splits,
          trained.metrics.version, resolved["version"], report["raw_uri"], current["x"])
'''
    found = string_key_reads(planted, keys)
    assert [f.split(": ", 1)[1] for f in found] == [
        "current['model_uri']", "pointer.get('run')", "drift['drifted']",
        "manifest.verdict.drift.get('against')", "report['history']", "drift_row['kind']",
        "published['version_uri']", "self.published.get('created', True)",
        "trained['metrics']", "trained.get('promoted')", "handed['promoted']"]
    assert _record_template_reads("{{ drift.get('rows') }}\n{{ drift.rows }}\n"
                                  "{{ current['run'] }}") == [
        "{{ drift.get('rows') }}", "{{ current['run'] }}"]


# ---- one word per concept: the glossary in docs/ARCHITECTURE.md held against the code -------

GLOSSARY_WORDS = ("partition", "segment", "window", "interval", "split", "shard", "chunk",
                  "extent", "label", "verdict")
NAMED_WORDS = ("partition", "window", "interval", "chunk", "extent", "verdict")  # name by name
GLOSSARY_DIRS = ("etl", "training", "dags", "plugins")


def _architecture_page() -> str:
    return (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def glossary_rows(text: str) -> dict[str, tuple[str, str]]:
    """The Words table: word -> (meaning, in code)."""
    section = text.split("## Words", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] not in ("word", "---"):
            rows[cells[0].strip('"')] = (cells[1], cells[2])
    return rows


def listed_names(text: str) -> dict[str, set[str]]:
    """"Names in code": word -> every identifier the page lists for it (libraries' too)."""
    section = text.split("### Names in code", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for item in re.split(r"\n- ", "\n" + section.split("\n- ", 1)[1]):
        word, _, names = item.partition(":")
        if word.strip():
            out[word.strip()] = set(re.findall(r"`([^`]+)`", names))
    return out


def identifiers_with(words: tuple[str, ...], source: str) -> dict[str, set[str]]:
    """word -> the names defined or used in ``source`` that hold it (any case)."""
    found: dict[str, set[str]] = {w: set() for w in words}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            names = [node.arg]
        else:
            continue
        for name in names:
            for word in words:
                if word in name.lower():
                    found[word].add(name)
    return found


def unlisted_names(listed: dict[str, set[str]], files: list[Path],
                   root: Path = REPO) -> dict[str, list[str]]:
    """word -> names in ``files`` holding it that the page does not list (with their file)."""
    out: dict[str, set[str]] = {w: set() for w in listed}
    for path in files:
        for word, names in identifiers_with(tuple(listed), path.read_text("utf-8")).items():
            out[word] |= {f"{n} ({path.relative_to(root)})" for n in names - listed[word]}
    return {w: sorted(n) for w, n in out.items() if n}


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = obj if dataclasses_field(obj, attr) else getattr(obj, attr)
            return True
        except AttributeError:
            return False
    return False


def dataclasses_field(obj: object, name: str) -> bool:
    """A dataclass field with no class attribute (a default-less one) still names code."""
    import dataclasses

    return dataclasses.is_dataclass(obj) and name in {f.name for f in dataclasses.fields(obj)}


def test_the_glossary_covers_its_words_and_names_only_code_that_exists():
    rows = glossary_rows(_architecture_page())
    for word in GLOSSARY_WORDS:
        assert any(word in w for w in rows), f"the glossary has no row for {word!r}"
    refs = {ref for _, code in rows.values() for ref in re.findall(r"`([^`]+)`", code)
            if re.fullmatch(r"(etl|training)(\.\w+)+", ref)}
    assert len(refs) > 15, refs  # the column is read, not skipped
    assert sorted(r for r in refs if not _resolves(r)) == []


def test_each_word_is_used_in_code_only_under_the_names_the_glossary_lists():
    listed = listed_names(_architecture_page())
    assert set(listed) == set(NAMED_WORDS)
    files = [p for d in GLOSSARY_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    assert len(files) > 100
    assert unlisted_names(listed, files) == {}


def test_a_label_is_only_what_a_model_learns():
    """``label`` named a segment's raw partitions (``20130101_20130131``) beside the model's
    label on the same object; that is the segment's *extent* now (a raw partition's *name*).
    The records of segments and raw partitions hold no ``label`` field again."""
    import dataclasses

    from etl.segments.plan import RawPartition, SegmentTask
    from etl.versions.diff import SegmentChange
    from etl.versions.manifest import SegmentEntry
    from etl.versions.segment import SegmentMeta, SegmentOrigin

    for record in (RawPartition, SegmentTask, SegmentChange, SegmentEntry, SegmentMeta,
                   SegmentOrigin):
        names = {f.name for f in dataclasses.fields(record)}
        assert "label" not in names and names & {"extent", "name"}, record.__name__


def classes_by_name(files: list[Path], root: Path = REPO) -> dict[str, list[str]]:
    """Class name -> the files defining a class of that name, for names defined more than once."""
    found: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(str(path.relative_to(root)))
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_classes_share_a_name(tmp_path):
    """``Verdict`` was a version's validation outcome (etl.versions.manifest) and a model's
    badge in the UI: one name, two classes. A class name means one thing across the product;
    shown failing on a planted second class."""
    files = [p for d in GLOSSARY_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    assert classes_by_name(files) == {}
    planted = tmp_path / "plugins" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("class Verdict:\n    pass\n")
    (tmp_path / "etl.py").write_text("class Verdict:\n    pass\n")
    assert classes_by_name([tmp_path / "etl.py", planted], tmp_path) == {
        "Verdict": ["etl.py", "plugins/planted.py"]}


def test_the_word_check_catches_a_new_meaning(tmp_path):
    """Not vacuous: a planted name that uses a listed word another way is caught, however it
    appears (a function, an argument, an attribute), and listed names are not."""
    planted = tmp_path / "planted.py"
    planted.write_text("def count_partitions(window, chunk_bytes=1):\n"
                       "    return window.segment_partition + interval_s\n")
    listed = {"partition": {"partitions"}, "window": {"window"}, "chunk": {"chunk"},
              "interval": {"interval"}}
    found = unlisted_names(listed, [planted], tmp_path)

    assert found == {"partition": ["count_partitions (planted.py)",
                                   "segment_partition (planted.py)"],
                     "chunk": ["chunk_bytes (planted.py)"], "interval": ["interval_s (planted.py)"]}
