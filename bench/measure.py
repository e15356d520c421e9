"""The individual measurements of `make bench`; each returns plain numbers."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.proctree import last_json, run_checked

REPO = Path(__file__).resolve().parent.parent


def machine() -> dict[str, Any]:
    """Cores, memory and GPU of the machine the figures were taken on."""
    import psutil

    gpus: list[str] = []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cores": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "gpu": gpus or None, "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


YEAR_END = "2014-01-01T00:00:00Z"


def fresh_flights_root(work: Path, name: str, scale: int = 1,
                       days: tuple[str, str] | None = None, root: str | None = None) -> str:
    """A new storage root with the flights landed ``scale`` times (only ``days`` if given);
    ``root`` (a gs:// URI, say) replaces ``file://<work>/<name>``, which is emptied first."""
    import shutil
    from datetime import date

    from etl.kinds.landing import LandOptions
    from etl.kinds.tabular.land import land

    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    root = root or f"file://{folder}"
    window = {"start": date.fromisoformat(days[0]), "end": date.fromisoformat(days[1])} \
        if days else {}
    land(root, "flights", LandOptions(scale=scale, **window))
    return root


def _interval_args(interval_end: str, interval_start: str | None) -> list[str]:
    return ["--interval-end", interval_end] + (
        ["--interval-start", interval_start] if interval_start else [])


def etl_command(root: str, interval_end: str, interval_start: str | None = None,
                dataset: str = "flights") -> list[str]:
    """The ``python -m etl run`` command line every bench run uses (run id ``bench``): the one
    chain, ``etl build`` then ``etl publish``, for every dataset kind."""
    return [sys.executable, "-m", "etl", "run", "--root", root, "--dataset", dataset,
            "--run-id", "bench", *_interval_args(interval_end, interval_start)]


GX_IMPORT = "gx_import_s"  # a build's timing: the GX import it paid inside build_s


def work_s(timings: dict[str, float], keys: tuple[str, ...] | None = None) -> float:
    """The steps' own seconds (``keys`` of ``timings``, default all of them) less the Great
    Expectations import the build records inside its ``build_s``: a fixed cost, not work."""
    names = [k for k in (keys or timings) if k != GX_IMPORT]
    return sum(timings.get(k, 0.0) for k in names) - timings.get(GX_IMPORT, 0.0)


def etl_cli(root: str, interval_end: str = YEAR_END, interval_start: str | None = None,
            dataset: str = "flights", *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``python -m etl run`` as an operator runs it, measured from outside; ``env`` replaces
    the child's environment (a specs path, a storage emulator).

    rows/s is over the child's whole wall time (interpreter start and imports included); the
    fixed overhead is that wall time minus the steps' own times from the run result, less the
    Great Expectations import the build step records inside its ``build_s`` (``gx_import_s``):
    a fixed cost of the process, not work.
    """
    cmd = [*etl_command(root, interval_end, interval_start, dataset), "--json"]
    child = run_checked(cmd, cwd=REPO, env=env)
    from etl.versions.catalog import PublishedVersion

    published = PublishedVersion.from_json(last_json(child.stdout), "etl run --json")
    if not published.created:
        raise RuntimeError(f"{root}: version already existed, nothing was measured")
    rows = published.rows
    timings = dict(published.timings or {})
    steps = work_s(timings)
    return {"rows": rows, "rows_per_s": rows / child.wall_s, **child.figures(),
            "timings": timings, "steps_s": steps,
            "fixed_overhead_s": child.wall_s - steps, "in_process_wall_s": published.wall_s,
            "version_uri": published.version_uri, "splits": dict(published.splits)}


def floor(root: str, out: str, interval_end: str = YEAR_END,
          interval_start: str | None = None, dataset: str = "flights") -> dict[str, Any]:
    """``python -m bench.floor`` over the same landed files, measured like the CLI run."""
    cmd = [sys.executable, "-m", "bench.floor", "--root", root, "--dataset", dataset,
           "--out", out, *_interval_args(interval_end, interval_start)]
    child = run_checked(cmd, cwd=REPO)
    result = last_json(child.stdout)
    return {**result, "rows_per_s": result["rows"] / child.wall_s,
            "work_rows_per_s": result["rows_per_s"], **child.figures()}


def etl_vs_floor(work: Path, scale: int, days: tuple[str, str] | None,
                 interval: dict[str, str | None]) -> tuple[str, dict[str, Any]]:
    """``etl run`` (the bulk build of the landed span) and the floor on the same freshly
    landed flights at ``scale``x: ``(root, {etl, floor, etl_over_floor})``."""
    import shutil

    root = fresh_flights_root(work, f"{scale}x", scale, days)
    etl = etl_cli(root, **interval)
    out = str(work / f"floor-{scale}x")
    fl = floor(root, out, **interval)
    shutil.rmtree(out, ignore_errors=True)
    return root, {"etl": etl, "floor": fl, "etl_over_floor": etl["rows_per_s"] / fl["rows_per_s"]}


def csv_read(root: str) -> dict[str, float]:
    """pyarrow's multithreaded CSV reader over the landed per-day flight files: the read ceiling."""
    import pyarrow.csv as pacsv

    from etl import storage

    fs, path = storage.get_fs(storage.join(root, "raw", "flights"))
    files = sorted(fs.glob(f"{path}/date=*/flights.csv"))
    t0 = time.perf_counter()
    rows = nbytes = 0
    for f in files:
        with fs.open(f, "rb") as fh:
            table = pacsv.read_csv(fh)
        rows += table.num_rows
        nbytes += fs.size(f)
    wall = time.perf_counter() - t0
    return {"csv_read_rows_per_s": rows / wall, "csv_read_mb_per_s": nbytes / wall / 2**20,
            "csv_rows": rows}


def input_pipeline(version_uri: str, quick: bool = False) -> dict[str, Any]:
    """training's bench-input: raw read, parse ceiling, ours, naive, stall ratio."""
    from training.config import BenchConfig
    from training.run.bench import bench_input

    config = BenchConfig(batches=40, warmup_batches=5, naive_batches=10, stall_batches=20,
                         repeats=2) if quick else None
    return bench_input(version_uri, config)


def core_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below ``cores``, then ``cores``: the counts the stall ratio is taken at."""
    counts, k = [], 1
    while k < cores:
        counts.append(k)
        k *= 2
    return [*counts, cores]


def stall_by_cores(version_uri: str, full: dict[str, Any], quick: bool = False,
                   work: Path | None = None) -> dict[str, dict[str, float]]:
    """The stall ratio and our pipeline's rate at each core count: ``full`` (this process, every
    core) for the largest, a ``bench-input --cores k`` child pinned to k CPUs for the others."""
    cores = int(full["cores"])
    out: dict[str, dict[str, float]] = {}
    for k in core_counts(cores):
        if k == cores:
            figures = full
        else:
            path = Path(work or Path.cwd()) / f"bench-input-{k}-cores.json"
            cmd = [sys.executable, "-m", "training", "bench-input", "--version-uri", version_uri,
                   "--cores", str(k), "--json", str(path)]
            if quick:
                cmd += ["--batches", "40", "--warmup-batches", "5", "--naive-batches", "10",
                        "--stall-batches", "20", "--repeats", "2"]
            run_checked(cmd, cwd=REPO)
            figures = json.loads(path.read_text())
        out[str(k)] = {"stall_ratio": figures["stall_ratio"],
                       "input_examples_per_s": figures["input_examples_per_s"],
                       "ratio_to_parse_ceiling": figures["ratio_to_parse_ceiling"]}
    return out


_PARSE_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
t1 = time.perf_counter()
path = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=path, bundle_path=path.parent, bundle_name="dags-folder")
t2 = time.perf_counter()
print(json.dumps({"parse_s": t2 - t1, "errors": {k: str(v)[:500] for k, v in bag.import_errors.items()},
                  "dags": sorted(bag.dag_ids)}))
"""


def dag_parse_times(airflow_home: str) -> dict[str, dict[str, Any]]:
    """Seconds DagBag spends on each DAG file, in a fresh interpreter with Airflow imported."""
    env = dict(os.environ, AIRFLOW_HOME=airflow_home, AIRFLOW__CORE__LOAD_EXAMPLES="False",
               PYTHONPATH=str(REPO))
    results: dict[str, dict[str, Any]] = {}
    for path in sorted((REPO / "dags").glob("*.py")):
        if path.name.startswith("_"):
            continue
        proc = subprocess.run([sys.executable, "-c", _PARSE_SNIPPET, str(path)], check=False,
                              env=env, capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"parsing {path} failed:\n{proc.stderr[-3000:]}")
        results[path.name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def scaled_main(doc: str, measure_all: Any, scales: tuple[int, ...], part: str) -> int:
    """The command line of a part taken at several scales of the flights (``training``,
    ``scoring``): ``--scales``, ``--days first,last`` (default: the year), ``--work`` and
    ``--out`` (``bench/<part>.json``); ``measure_all(work, scales, days)`` gives the result,
    whose targets are printed."""
    import argparse
    import logging

    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default=",".join(map(str, scales)))
    parser.add_argument("--days", default="", help="first,last day (default: the year)")
    parser.add_argument("--work", default=f".bench/{part}")
    parser.add_argument("--out", default=f"bench/{part}.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    days = tuple(args.days.split(",")) if args.days else None
    result = measure_all(Path(args.work).resolve(),
                         tuple(int(s) for s in args.scales.split(",")), days)
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result["targets"], indent=2))
    return 0
