"""The gauntlet (issue 33): every public table of ``bench.tables`` run as a new user runs it --
land the raw files, ``etl spec init`` given only the label and task, ``etl run``,
``training train`` -- each step a child process measured from outside, then the model against
a HistGradientBoosting reference fitted on the same split and columns (``bench.references``).

A table's failure (a refusal, a crash, a timeout) is recorded with its message and step and
never stops the others; a traceback in any step's output is flagged as such. Beside the
draft's cost: the ETL's own reader (``etl.kinds.tabular.read.read_files``) over the same files.
``make bench`` runs it as its ``gauntlet`` part; ``python -m bench.gauntlet`` alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.proctree import last_json, run_child
from bench.references import compare, reference
from bench.tables import TABLES, Table, interval_end, land_table
from training.record import read_model_record

log = logging.getLogger("bench.gauntlet")
REPO = Path(__file__).resolve().parent.parent
RUN = "gauntlet"  # the training run's name under models/<name>/<version>/
TIMEOUT_S = {"land": 900, "spec_init": 900, "etl_run": 1800, "training": 3600}
TOLERANCE_NOTE = "within 5%: accuracy, macro-F1 or AUC >= 0.95x the reference, RMSE <= 1.05x"
TRACEBACK = "Traceback (most recent call last)"
QUICK_TABLES = ("iris", "barley", "penguins")  # ``make bench-quick``: the harness, in minutes


def _message(text: str, lines: int = 3) -> str:
    """What a failed step said: its exception line after a traceback, else from its last
    ``error:`` line on (the CLIs print what to change there), else its last lines."""
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if TRACEBACK in text:
        after = text.rsplit(TRACEBACK, 1)[1].strip().splitlines()
        kept = [line.strip() for line in after if line.strip() and not line.startswith(" ")]
        return (kept or ["(empty traceback)"])[-1][:1000]
    errors = [i for i, line in enumerate(kept) if line.startswith("error:")]
    if errors:  # the CLIs' refusal, then what failed (without its example rows)
        return " | ".join(line for line in kept[errors[-1]:]
                          if not line.startswith("e.g."))[:1000]
    return " | ".join(kept[-lines:])[:1000]


def step(name: str, module: str, args: list[str], work: Path, env: dict[str, str],
         deadline: float | None = None) -> dict[str, Any]:
    """``python -m <module> <args>`` as a child, stopped at ``TIMEOUT_S[name]`` or at
    ``deadline`` (``time.monotonic()``), whichever comes first; its seconds, exit, message and
    output log (``stdout``: what it printed, for the caller to pop)."""
    timeout = TIMEOUT_S[name] if deadline is None else \
        max(1.0, min(TIMEOUT_S[name], deadline - time.monotonic()))
    child = run_child([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                      timeout_s=timeout)
    (work / f"{name}.log").write_text(f"$ {module} {' '.join(args)}\n{child.stdout}\n"
                                      f"--- stderr\n{child.stderr}")
    out = child.stdout + child.stderr
    ok = child.returncode == 0
    return {"ok": ok, "rc": child.returncode, "seconds": round(child.wall_s, 2),
            "cpu_s": round(child.cpu_s, 2), "peak_rss_mb": round(child.peak_rss_mb),
            "traceback": TRACEBACK in out, "log": str(work / f"{name}.log"),
            "stdout": child.stdout, **({"timed_out": True} if child.timed_out else {}),
            **({} if ok and TRACEBACK not in out else {
                "message": _message(child.stderr or out),
                "command": f"python -m {module} {' '.join(args)}",
                "tail": "\n".join((child.stderr or out).strip().splitlines()[-8:])[-1500:]})}


def _env(specs: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PIPELINE_SPECS_PATH":
           str(specs) if specs else str(REPO / "etl" / "examples")}
    env.pop("PIPELINE_STORAGE_ROOT", None)
    return env


def etl_read(spec_yaml: Path, files: list[Path]) -> dict[str, Any]:
    """The ETL's reader of the drafted source over every landed file, timed in this process
    (the draft's cost is to be read beside it)."""
    from etl.kinds.tabular.read import read_files
    from etl.spec import load_spec

    try:
        source = load_spec(spec_yaml).primary_source
        t0 = time.perf_counter()
        # file:// + the path as it is, as the ETL lists it (as_uri() would write date%3D...)
        _, counts = read_files([f"file://{f}" for f in files], source)
        return {"seconds": round(time.perf_counter() - t0, 3), "files": len(files),
                "rows": sum(counts)}
    except Exception as exc:  # noqa: BLE001 - recorded beside the draft, never stops the table
        return {"error": f"{type(exc).__name__}: {exc}"[:1000],
                "traceback": traceback.format_exc()[-2000:]}


def _land(table: Table, work: Path, deadline: float | None) -> tuple[str, list[Path]]:
    """Land ``table`` under a fresh root (flights: ``etl land``, as its users land it);
    (root URI, landed files)."""
    data = work / "data"
    root = data.as_uri()
    if table.layout == "flights":
        landed = step("land", "etl", ["land", "--root", root, "--dataset", "flights",
                                      "--start-day", table.window[0], "--end-day",
                                      table.window[1]], work, _env(None), deadline)
        if not landed["ok"]:
            raise RuntimeError(f"etl land: {landed.get('message')}")
    else:
        land_table(table, data)
    return root, sorted(p for p in (data / "raw").rglob("*") if p.is_file())


def _draft(table: Table, root: str, work: Path, result: dict[str, Any],
           deadline: float | None) -> str | None:
    """``etl spec init`` with only label and task; the drafted spec's path, None if refused."""
    if table.layout == "flights":
        result["spec_init"] = {"skipped": "the shipped flights spec (its label is derived)"}
        return "flights"
    spec_dir = work / "specs" / table.name
    result["spec_init"] = step("spec_init", "etl", [
        "spec", "init", "--name", table.name, "--source", table.raw_path, "--root", root,
        "--label", table.label, "--task", table.task, "--out", str(spec_dir), "--force"],
        work, _env(work / "specs"), deadline)
    said = result["spec_init"].pop("stdout").splitlines()
    if "Inferred:" in said[:-1]:  # what the draft read: every row, or which sample
        result["spec_init"]["read"] = said[said.index("Inferred:") + 1].strip()
    return str(spec_dir / "spec.yaml") if result["spec_init"]["ok"] else None


def _train_and_score(table: Table, root: str, version_uri: str, work: Path,
                     result: dict[str, Any], deadline: float | None) -> None:
    from etl import storage

    specs = None if table.layout == "flights" else work / "specs"
    result["training"] = step("training", "training", [
        "train", "--root", root, "--dataset", table.name, "--run", RUN, "--overwrite"],
        work, _env(specs), deadline)
    result["training"].pop("stdout")
    run_uri = storage.join(root, "models", table.name, version_uri.rstrip("/").rsplit("/", 1)[-1],
                           RUN)
    result["model_uri"] = run_uri
    record = read_model_record(run_uri)
    if record is not None:
        result["model"] = {k: float(v) for k, v in record.test.numbers().items()}
        result["examples"] = dict(record.examples) or None
        result["metrics_file"] = record  # read by verdict(), not stored
        result["gate"] = {"family": record.family, "family_choice": record.family_choice
                          and record.family_choice.to_json(),
                          "blessing": record.blessing and record.blessing.to_json()}
    t0 = time.perf_counter()
    ref = reference(version_uri, table.task, record.min_margin if record else None)
    result["reference"] = ref.scores
    result["reference_gate"] = {"beats_baseline": ref.beats_baseline, "checks": ref.gate}
    result["reference_s"] = round(time.perf_counter() - t0, 2)
    if result.get("model"):
        result.update(compare(result["model"], result["reference"], table.task))


def _with_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The table's result with its verdict (judged first: it drops the bulky metrics.json)."""
    judged = verdict(result)
    return {**result, "verdict": judged}


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    """blessed / not blessed (a model written, with the gate's reason) / refused (a step said
    what to change) / traceback (a step crashed) / timeout (a step was stopped at its time
    limit) / error (the harness itself failed)."""
    steps = [s for s in ("spec_init", "etl_run", "training") if isinstance(result.get(s), dict)]
    crashed = [s for s in steps if result[s].get("traceback")]
    failed = next((s for s in steps if result[s].get("ok") is False), None)
    record = result.pop("metrics_file", None)
    if record is not None:
        older = record.json_extra  # the verdict keys of records written before blessings
        gate = (record.blessing and record.blessing.to_json()) or older.get("verdict") or {}
        blessed = gate.get("blessed") if isinstance(gate, dict) else older.get("blessed")
        if blessed is None:  # before blessings: a gate that writes only what it passes
            blessed = older.get("passed_quality_gate", failed is None)
        reasons = gate.get("reasons") or [gate.get("reason")] if isinstance(gate, dict) else []
        reason = "; ".join(r for r in reasons if r) or \
            (result[failed].get("message") if failed else None)
        status = "blessed" if blessed else "not blessed"
        harness = {"error": result["error"]["message"]} if result.get("error") else {}
        return {"status": status, "reason": reason, "traceback_in": crashed, **harness}
    if result.get("error"):
        return {"status": "error", "step": result["error"]["step"],
                "message": result["error"]["message"], "traceback_in": crashed}
    if failed:
        status = "traceback" if result[failed]["traceback"] else \
            "timeout" if result[failed].get("timed_out") else "refused"
        return {"status": status,
                "step": failed, "message": result[failed].get("message"),
                "traceback_in": crashed}
    return {"status": "no model", "message": "training exited 0 but wrote no metrics.json",
            "traceback_in": crashed}


def run_table(table: Table, work: Path, budget_s: float | None = None) -> dict[str, Any]:
    """Land, draft, build, train and score ``table`` in a fresh root under ``work``; with
    ``budget_s``, every step is stopped at that many seconds from the start (the reference,
    run in this process, is not)."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result: dict[str, Any] = {
        "table": table.name, "package": table.package, "resource": table.resource,
        "layout": table.layout, "label": table.label, "task": table.task, "shape": table.shape}
    where = "land"
    try:
        root, files = _land(table, work, deadline)
        result["landed"] = {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}
        where = "spec init"
        spec = _draft(table, root, work, result, deadline)
        if spec is None:
            return _with_verdict(result)
        if spec != "flights":
            result["etl_read"] = etl_read(Path(spec), files)
        where = "etl run"
        result["etl_run"] = step("etl_run", "etl", [
            "run", "--root", root, "--dataset", spec, "--interval-end", interval_end(table),
            "--run-id", RUN, "--json"], work,
            _env(None if spec == "flights" else work / "specs"), deadline)
        if not result["etl_run"]["ok"]:
            result["etl_run"].pop("stdout")
            return _with_verdict(result)
        from etl.versions.catalog import PublishedVersion

        published = PublishedVersion.from_json(last_json(result["etl_run"].pop("stdout")),
                                         "etl run --json")
        result["rows"] = published.rows
        result["splits"] = dict(published.splits)
        result["etl_timings"] = dict(published.timings or {})
        where = "training or reference"
        _train_and_score(table, root, published.version_uri, work, result, deadline)
    except Exception as exc:  # noqa: BLE001 - recorded; the gauntlet goes on
        result["error"] = {"step": where, "message": f"{type(exc).__name__}: {exc}"[:1000],
                           "traceback": traceback.format_exc()[-3000:]}
    return _with_verdict(result)


def summary(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 33's count: tables ending blessed within 5% of the reference (>= 90% asked), the
    packages they come from, the tables that crashed, and flights' AUC against the
    reference's on the same split."""
    status = {n: r["verdict"]["status"] for n, r in results.items()}
    within = sorted(n for n, r in results.items() if r.get("met"))
    blessed = sorted(n for n in within if status[n] == "blessed")
    flights = results.get("flights", {})
    model_auc, ref_auc = (flights.get(k, {}).get("auc") for k in ("model", "reference"))
    return {
        "tables": len(results), "packages": sorted({r["package"] for r in results.values()}),
        "within_5pct": within, "blessed_within_5pct": blessed,
        "blessed_within_5pct_share": len(blessed) / len(results) if results else None,
        "by_status": {s: sorted(n for n in status if status[n] == s) for s in set(status.values())},
        "tracebacks": sorted(n for n, r in results.items() if r["verdict"].get("traceback_in")
                             or r["verdict"]["status"] in ("traceback", "error")),
        "harness_errors": {n: r["error"]["message"] for n, r in results.items() if r.get("error")},
        "flights_window": TABLES["flights"].window if "flights" in results else None,
        "flights_auc": {"model": model_auc, "reference": ref_auc,
                        "met": None if None in (model_auc, ref_auc) else model_auc >= ref_auc},
        "tolerance": TOLERANCE_NOTE}


def run_all(work: Path, names: list[str] | None = None,
            save: Any = None) -> dict[str, Any]:
    """Every table (or ``names``), each in its own root under ``work``; ``save(gauntlet)``
    after each, so an interrupted gauntlet keeps what it measured."""
    gauntlet: dict[str, Any] = {"tables": {}}
    for name in names or list(TABLES):
        log.info("gauntlet: %s", name)
        t0 = time.perf_counter()
        result = run_table(TABLES[name], work / name)
        result["seconds"] = round(time.perf_counter() - t0, 1)
        gauntlet["tables"][name] = result
        gauntlet["summary"] = summary(gauntlet["tables"])
        log.info("gauntlet: %s -> %s in %.0f s", name, result["verdict"]["status"],
                 result["seconds"])
        if save:
            save(gauntlet)
    return gauntlet


def table_names(parser: Any, text: str) -> list[str] | None:
    """``--tables a,b`` as names of ``TABLES`` (None: every table); an unknown one is a usage
    error naming it."""
    names = [n for n in text.split(",") if n] or None
    if unknown := set(names or ()) - set(TABLES):
        parser.error(f"--tables: unknown {sorted(unknown)}")
    return names


def json_saver(out: Path) -> Any:
    """A ``save(result)`` that rewrites ``out`` whole with the result so far."""
    import json

    return lambda result: out.write_text(
        json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")


def main() -> int:
    """``python -m bench.gauntlet [--tables a,b] [--out FILE]``: the gauntlet alone, stored as
    JSON (``make bench`` runs the same as its ``gauntlet`` part, into bench/results.json)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--tables", default="", help=f"comma-separated, of {','.join(TABLES)}")
    parser.add_argument("--work", default=".bench/gauntlet", help="scratch folder")
    parser.add_argument("--out", default="bench/gauntlet.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    gauntlet = run_all(Path(args.work).resolve(), table_names(parser, args.tables),
                       json_saver(Path(args.out)))
    for name, r in gauntlet["tables"].items():
        v = r["verdict"]
        print(f"{name:16} {v['status']:12} {r.get('ratios', '')} {v.get('message') or ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
