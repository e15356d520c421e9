"""`make bench`: ETL and input-pipeline throughput against baselines and ceilings, in one run.

Every ratio compares figures measured side by side in this run on this machine; the targets
(issue 7) are checked and a missed one is reported as missed, never hidden.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench import measure, report

log = logging.getLogger("bench")


def _fresh_root(work: Path, name: str, scale: int) -> str:
    """A new storage root with the flights landed ``scale`` times."""
    from etl.sources.land import land

    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    root = f"file://{folder}"
    land(root, "flights", scale=scale)
    return root


def _save(results: dict[str, Any], out: Path) -> None:
    """Write what is measured so far: a failure in a late stage keeps the earlier figures."""
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")


def run(work: Path, scales: list[int], out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": measure.machine(), "etl_peak_rss_mb": {},
                               "etl_scaling": {}, "complete": False}
    log.info("landing flights x1 (two roots: default encoder and Python baseline)")
    root_fast = _fresh_root(work, "x1-fast", 1)
    root_slow = _fresh_root(work, "x1-python", 1)
    results.update(measure.csv_read(root_fast))
    log.info("ETL end to end, default (vectorized) encoder")
    fast = measure.etl_run(root_fast, "vectorized")
    log.info("ETL end to end, pure-Python serialization baseline")
    slow = measure.etl_run(root_slow, "python")
    results["etl_rows_per_s"] = fast["rows_per_s"]
    results["etl_python_baseline_rows_per_s"] = slow["rows_per_s"]
    results["etl_rows"] = fast["rows"]
    results["etl_run"], results["etl_python_run"] = fast, slow
    results["etl_peak_rss_mb"]["1x"] = fast["peak_rss_mb"]
    results["etl_scaling"]["1x"] = fast
    _save(results, out)
    shutil.rmtree(work / "x1-python", ignore_errors=True)
    for scale in (s for s in scales if s != 1):
        log.info("ETL at %dx the flights data", scale)
        root = _fresh_root(work, f"x{scale}", scale)
        scaled = measure.etl_run(root, "vectorized")
        results["etl_peak_rss_mb"][f"{scale}x"] = scaled["peak_rss_mb"]
        results["etl_scaling"][f"{scale}x"] = scaled
        _save(results, out)
        shutil.rmtree(work / f"x{scale}", ignore_errors=True)
    log.info("serialization ceiling and input pipeline on the x1 version")
    results.update(measure.serialization(fast["version_uri"]))
    bench_input = measure.input_pipeline(fast["version_uri"])
    results["input"] = bench_input
    for key in ("input_examples_per_s", "input_naive_examples_per_s",
                "input_ceiling_examples_per_s", "stall_ratio"):
        results[key] = bench_input[key]
    _save(results, out)
    log.info("DAG parse times")
    with tempfile.TemporaryDirectory() as home:
        parsed = measure.dag_parse_times(home)
    results["dag_parse_s"] = {name: r["parse_s"] for name, r in parsed.items()}
    results["targets"] = report.check_targets(results)
    results["complete"] = True
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=".bench", help="scratch folder for the storage roots")
    parser.add_argument("--scales", default="1,4,16", help="comma-separated data multiples")
    parser.add_argument("--out", default="bench/results.json")
    parser.add_argument("--no-performance-md", action="store_true",
                        help="do not rewrite the table in PERFORMANCE.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    scales = sorted({int(s) for s in args.scales.split(",")} | {1})
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    results = run(work, scales, Path(args.out))
    _save(results, Path(args.out))
    table = report.table(results)
    print(table)
    if not args.no_performance_md:
        report.update_performance_md(Path("PERFORMANCE.md"), table)
    missed = [t["name"] for t in results["targets"] if not t["met"]]
    if missed:
        print(f"\nMISSED targets: {', '.join(missed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
