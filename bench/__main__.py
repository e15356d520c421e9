"""`make bench`: the ETL against its floor and its peers, its fixed overhead, and the input
pipeline against its parsing ceiling -- in one run, on the same data (issue 15); what segment
builds cost on one-row partitions, per night and on a bucket (issue 25, bench/segments.py);
the gauntlet of public tables, each from its raw files to a model scored against a
HistGradientBoosting reference (issue 33, bench/gauntlet.py); the drawn gauntlet, two seeded
draws of 100 (table, label) pairs each from about 1,000 R datasets run the same way (issue 39,
bench/drawn.py); ``training score`` on the scaled flights against the same SavedModel's
serving signature on the same rows in memory (issue 41, bench/scoring.py).

Every ratio compares figures measured side by side in this run on this machine; the targets
are checked and a missed one is reported as missed, never hidden. ``--quick`` checks the
harness in a few minutes (1x only, a short input bench); its figures mean little.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import drawn, gauntlet, measure, overhead, report, tuning
from bench.peer_envs import PEERS, run_peers

log = logging.getLogger("bench")
DAY_START, DAY_END = "2013-01-01T00:00:00Z", "2013-01-02T00:00:00Z"
DAY = (DAY_START[:10], DAY_END[:10])
QUICK_DAYS = ("2013-01-01", "2013-01-08")  # --quick: one week of flights instead of the year


PARTS = ("scaling", "overhead", "nightly", "segments", "input", "dags", "gauntlet", "drawn",
         "serving", "training", "scoring", "tuning")
ETL_PARTS = ("scaling", "overhead", "nightly", "segments", "input")
"""The parts whose figures time the ETL's code (``etl_code_commit`` names it)."""


def _fresh_root(work: Path, name: str, scale: int = 1,
                days: tuple[str, str] | None = None) -> str:
    return measure.fresh_flights_root(work, name, scale, days)


def _interval(days: tuple[str, str] | None) -> dict[str, str | None]:
    if not days:
        return {"interval_end": measure.YEAR_END, "interval_start": None}
    return {"interval_end": f"{days[1]}T00:00:00Z", "interval_start": f"{days[0]}T00:00:00Z"}


def _save(results: dict[str, Any], out: Path) -> None:
    """Write what is measured so far: a failure in a late stage keeps the earlier figures."""
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")


def _scale(results: dict[str, Any], work: Path, scale: int,
           days: tuple[str, str] | None) -> tuple[str, dict[str, Any]]:
    """``etl run`` (the chain) and the floor on the same freshly landed data at ``scale``x."""
    key = f"{scale}x"
    log.info("ETL at %s: landing, etl run, floor", key)
    root, run = measure.etl_vs_floor(work, scale, days, _interval(days))
    results["etl_scaling"][key] = run
    results["etl_peak_rss_mb"][key] = run["etl"]["peak_rss_mb"]
    if scale == 1:  # a small run computes in one process; the larger ones on a LocalCluster
        results["etl_1x_on_a_cluster"] = _one_x_on_a_cluster(work, days)
    return root, run["etl"]


def _one_x_on_a_cluster(work: Path, days: tuple[str, str] | None) -> dict[str, Any]:
    """The 1x run again with a LocalCluster forced (``PIPELINE_IN_PROCESS_BYTES=0``): memory
    compared like with like with the larger scales, which start one (``etl.cluster``)."""
    log.info("ETL at 1x on a LocalCluster (memory like with like)")
    root = _fresh_root(work, "1x-cluster", 1, days)
    interval = _interval(days)
    run = measure.etl_cli(root, interval["interval_end"], interval["interval_start"],
                          env={**os.environ, "PIPELINE_IN_PROCESS_BYTES": "0"})
    shutil.rmtree(work / "1x-cluster", ignore_errors=True)
    return {k: run[k] for k in ("rows", "wall_s", "cpu_s", "peak_rss_mb", "peak_pss_mb")}


def _fixed_overhead(results: dict[str, Any], work: Path) -> None:
    log.info("fixed overhead: etl run, then build and publish as tasks, one-day window")
    fixed = measure.etl_cli(_fresh_root(work, "day-cli", days=DAY), DAY_END, DAY_START)
    results["etl_fixed_run"] = fixed
    tasks = overhead.task_overheads(lambda name: _fresh_root(work, name, days=DAY), DAY_END,
                                    DAY_START)
    # Great Expectations is imported on first use, inside the run's build_s: each run records
    # that import's seconds and the figure counts them as overhead (bench.measure.etl_cli)
    results["etl_fixed_overhead_s"] = fixed["fixed_overhead_s"]
    results["etl_tasks"] = tasks
    results["etl_task_fixed_overhead_s"] = tasks["max_overhead_s"]
    for name in ("day-cli", "day-tasks", "day-forked"):
        shutil.rmtree(work / name, ignore_errors=True)


def _nightly(results: dict[str, Any], work: Path, days: tuple[str, str] | None) -> None:
    from datetime import date

    from bench.incremental import nightly

    first, last = (date.fromisoformat(d) for d in (days or ("2013-01-01", "2014-01-01")))
    results["incremental"] = nightly(lambda name, days=None: _fresh_root(work, name, days=days),
                                     first, last)
    results["incremental_cpu_ratio"] = results["incremental"]["incremental_cpu_ratio"]
    for name in ("inc-night-n", "inc-night-1"):
        shutil.rmtree(work / name, ignore_errors=True)


def _peers(results: dict[str, Any], work: Path, root: str, names: list[str],
           timeout_s: float) -> None:
    from etl import storage
    from etl.spec import load_spec

    spec = load_spec("flights")
    raw = Path(storage.get_fs(storage.join(root, "raw"))[1])
    files = sorted(str(p) for p in (raw / "flights").glob("date=*/flights.csv"))
    text = [c for c, t in spec.primary_source.columns.items() if t == "timestamp"]
    log.info("peers %s on the %d files of %s", names, len(files), results["peers_scale"])
    results["peers"] = run_peers(names, raw, files, work, os.cpu_count() or 1, text, timeout_s)


def _scaling(results: dict[str, Any], work: Path, scales: list[int], out: Path,
             peers: list[str], peer_timeout_s: float, peer_scale: int) -> dict[str, Any]:
    """Each scale's ETL run and floor, the CSV read at 1x, the peers; returns the 1x run."""
    days = QUICK_DAYS if results["quick"] else None
    one_x_root, one_x = _scale(results, work, 1, days)
    results.update(measure.csv_read(one_x_root))
    _save(results, out)
    root = one_x_root
    for scale in scales:
        if scale != 1:
            if root != one_x_root:
                shutil.rmtree(Path(root.removeprefix("file://")), ignore_errors=True)
            root, _ = _scale(results, work, scale, days)
            _save(results, out)
        if scale == peer_scale and peers:
            _peers(results, work, root, peers, peer_timeout_s)
            _save(results, out)
    largest = results["etl_scaling"][f"{scales[-1]}x"]
    results["etl_scale"] = f"{scales[-1]}x"
    results["etl_rows_per_s"] = largest["etl"]["rows_per_s"]
    results["etl_floor_rows_per_s"] = largest["floor"]["rows_per_s"]
    return one_x


def _input(results: dict[str, Any], work: Path, one_x: dict[str, Any] | None) -> None:
    """The input pipeline on the 1x version: this run's, else the kept 1x run's."""
    one_x = one_x or results["etl_scaling"].get("1x", {}).get("etl")
    if one_x is None:
        raise ValueError("the input part reads the 1x version: run it with the scaling part")
    log.info("input pipeline on the 1x version")
    bench_input = measure.input_pipeline(one_x["version_uri"], results["quick"])
    results["input"] = bench_input
    for key in ("input_examples_per_s", "input_parse_ceiling_examples_per_s",
                "input_ceiling_examples_per_s", "input_naive_examples_per_s", "stall_ratio"):
        results[key] = bench_input[key]
    log.info("stall ratio per core count")
    results["stall_ratio_by_cores"] = measure.stall_by_cores(one_x["version_uri"], bench_input,
                                                             results["quick"], work)


def _gauntlet(results: dict[str, Any], work: Path, out: Path) -> None:
    """Every public table from its raw files to a model, saved after each table."""
    def save(g: dict[str, Any]) -> None:
        results["gauntlet"] = g
        _save(results, out)

    names = list(gauntlet.QUICK_TABLES) if results["quick"] else list(gauntlet.TABLES)
    log.info("gauntlet: %d public tables, new-user runs against their references", len(names))
    results.pop("references", None)  # what the gauntlet replaced
    gauntlet.run_all(work / "gauntlet", names, save=save)


def _drawn(results: dict[str, Any], work: Path, out: Path) -> None:
    """Both seeds' draws (``--quick``: the first pairs of seed 1, no census), saved after each
    pair."""
    def save(d: dict[str, Any]) -> None:
        results["drawn"] = d
        _save(results, out)

    quick = results["quick"]
    seeds, pairs = ((drawn.SEEDS[0],), drawn.QUICK_PAIRS) if quick else (drawn.SEEDS, drawn.PAIRS)
    log.info("drawn gauntlet: seeds %s, %d pairs each", seeds, pairs)
    drawn.run(seeds, pairs, work / "drawn", save, with_census=not quick)


def _serving(results: dict[str, Any], work: Path, days: tuple[str, str] | None) -> None:
    """The exported trees against LightGBM on the flights year (``--quick``: one week)."""
    from bench import serving

    log.info("serving: flights trees, SavedModel against LightGBM on the test split")
    root = _fresh_root(work, "serving", 1, days)
    interval = _interval(days)
    run = measure.etl_cli(root, interval["interval_end"], interval["interval_start"])
    results["serving"] = serving.measure(run["version_uri"], work)
    shutil.rmtree(work / "serving", ignore_errors=True)


def _training(results: dict[str, Any], work: Path, days: tuple[str, str] | None) -> None:
    """``training train`` at 1x and 16x (``--quick``: one week at 1x and 2x), copies of a
    flight in one split, fit, evaluation and export measured apart."""
    from bench import training

    scales = (1, 2) if days else training.SCALES
    log.info("training at %s: flights_grouped (copies of a flight share its split)",
             ", ".join(f"{s}x" for s in scales))
    results["training"] = training.measure_all(work / "training", scales, days)


def _scoring(results: dict[str, Any], work: Path, days: tuple[str, str] | None) -> None:
    """``training score`` at 4x and 16x (``--quick``: one week at 1x and 2x) beside the same
    SavedModel's serving signature on the same rows in memory (issue 41)."""
    from bench import scoring

    scales = (1, 2) if days else scoring.SCALES
    log.info("scoring at %s against the serving signature on the same rows in memory",
             ", ".join(f"{s}x" for s in scales))
    results["scoring"] = scoring.measure_all(work / "scoring", scales, days,
                                             None if days else scoring.SMALL_DAYS)


def _tuning(results: dict[str, Any], work: Path, out: Path) -> None:
    """The picked tables tuned against untuned (figures only), saved after each table."""
    def save(t: dict[str, Any]) -> None:
        results["tuning"] = t
        _save(results, out)

    names = list(tuning.QUICK_TABLES) if results["quick"] else None
    trials = 3 if results["quick"] else tuning.TRIALS
    tuning.run_all(work / "tuning", names, save, trials=trials)


def _dags(results: dict[str, Any]) -> None:
    log.info("DAG parse times")
    with tempfile.TemporaryDirectory() as home:
        parsed = measure.dag_parse_times(home)
    results["dag_parse_s"] = {name: r["parse_s"] for name, r in parsed.items()}


def _start(out: Path, quick: bool, parts: tuple[str, ...]) -> dict[str, Any]:
    """A fresh result, or with only some ``parts`` the one in ``out`` with their figures to
    be replaced (the other parts' figures are kept, each part says when it was measured under
    ``measured``). The ETL's figures are one set: a run of an ``ETL_PARTS`` part on other ETL
    code (``etl/`` at its last change) than the file's starts afresh, and so does another
    ``--quick``; a run of other parts keeps the file's ETL figures and the commit they name."""
    from bench.segments import commit

    fresh = {"machine": measure.machine(), "commit": commit(), "etl_code_commit": commit("etl"),
             "etl_scaling": {}, "etl_peak_rss_mb": {}, "peers": {}, "quick": quick,
             "measured": {}}
    if set(parts) != set(PARTS) and out.exists():
        kept = json.loads(out.read_text())
        code = kept.get("etl_code_commit") or (kept.get("commit") and
                                               commit("etl", at=kept["commit"]))
        same_etl = code == fresh["etl_code_commit"] or not set(parts) & set(ETL_PARTS)
        if same_etl and kept.get("quick") == quick:
            return {**fresh, **kept, "machine": fresh["machine"], "etl_code_commit": code}
    return fresh


def run(work: Path, scales: list[int], out: Path, peers: list[str], quick: bool,
        peer_timeout_s: float = 3600, peer_scale: int | None = None,
        parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The figures of ``parts``; the peers run on the data of ``peer_scale`` (default: the
    largest)."""
    from bench.segments import commit, figures

    peer_scale = peer_scale or scales[-1]
    if peer_scale not in scales:
        raise ValueError(f"--peer-scale {peer_scale}: not one of the scales run {scales}")
    results = _start(out, quick, parts)
    head = commit()
    results.update(complete=False, peers_scale=f"{peer_scale}x")
    one_x = None
    steps = {
        "scaling": lambda: _scaling(results, work, scales, out, peers, peer_timeout_s,
                                    peer_scale),
        "overhead": lambda: _fixed_overhead(results, work),
        "nightly": lambda: _nightly(results, work, QUICK_DAYS if quick else None),
        "segments": lambda: figures(work, quick, results, lambda: _save(results, out)),
        "input": lambda: _input(results, work, one_x),
        "dags": lambda: _dags(results),
        "gauntlet": lambda: _gauntlet(results, work, out),
        "drawn": lambda: _drawn(results, work, out),
        "serving": lambda: _serving(results, work, QUICK_DAYS if quick else None),
        "training": lambda: _training(results, work, QUICK_DAYS if quick else None),
        "scoring": lambda: _scoring(results, work, QUICK_DAYS if quick else None),
        "tuning": lambda: _tuning(results, work, out)}
    for part in (p for p in PARTS if p in parts):
        began = {"at": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", "load": os.getloadavg(),
                 "commit": head}
        value = steps[part]()
        one_x = value if part == "scaling" else one_x
        results["measured"][part] = {"began": began, "ended": {
            "at": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", "load": os.getloadavg()}}
        _save(results, out)
    results["targets"] = report.check_targets(results)
    results["complete"] = set(results["measured"]) >= set(PARTS)
    _save(results, out)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=".bench", help="scratch folder for the storage roots")
    parser.add_argument("--scales", default="1,4,16", help="comma-separated data multiples")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"peers to install and run ({','.join(PEERS)}; '' for none)")
    parser.add_argument("--peer-scale", type=int, default=None,
                        help="the scale whose data the peers run on (default: the largest; "
                             "a peer at 16x can take an hour on 2 cores)")
    parser.add_argument("--peer-timeout", type=float, default=3600,
                        help="seconds a peer may run before it is stopped and recorded as such")
    parser.add_argument("--quick", action="store_true",
                        help="check the harness: one week at 1x, short input bench, results to "
                             "bench/results-quick.json, PERFORMANCE.md untouched")
    parser.add_argument("--out", default=None, help="default: bench/results.json")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"which figures to take ({','.join(PARTS)}); with fewer than all, "
                             "the others are kept from --out if taken on the same ETL code")
    parser.add_argument("--no-performance-md", action="store_true",
                        help="do not rewrite the table in PERFORMANCE.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    scales = [1] if args.quick else sorted({int(s) for s in args.scales.split(",")} | {1})
    out = Path(args.out or ("bench/results-quick.json" if args.quick else "bench/results.json"))
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    peers = [p for p in args.peers.split(",") if p]
    parts = tuple(p for p in args.parts.split(",") if p)
    if unknown := set(parts) - set(PARTS):
        parser.error(f"--parts: unknown {sorted(unknown)}; one of {','.join(PARTS)}")
    results = run(work, scales, out, peers, args.quick, args.peer_timeout,
                  None if args.quick else args.peer_scale, parts)
    _save(results, out)
    table = report.table(results)
    print(table)
    if not (args.no_performance_md or args.quick):
        report.update_performance_md(Path("PERFORMANCE.md"), table)
    missed = [t["name"] for t in results["targets"] if not t["met"]]
    if missed:
        print(f"\nMISSED targets: {', '.join(missed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
