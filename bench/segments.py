"""Issue 25's figures: what building versions from segments costs on data shaped unlike
flights, per night, and on a bucket. ``make bench`` calls ``figures`` (its ``--parts
scaling,segments --scales 1`` takes them alone, with the 1x ETL run and its floor that the
flights ratio needs).

Every run is ``python -m etl run``, the one chain (``etl build`` then ``etl publish``):

- ``tiny_partitions_bulk_ratio``: CPU-s (process tree) of the bulk build of ``tiny_days``
  (1,461 one-row daily CSVs) over ``tiny_onefile`` (the same rows as one CSV), same root.
- ``objects_per_nightly_run``: files the night adding day N writes (``bench/objects.py``),
  tiny at N = 30 and 1,000, flights at 30 and 365; each root built to N-1 just before.
- ``gcs_nightly_requests`` (``bench/gcs_requests.py``).
- ``flights_bulk_oneshot_ratio``: the bulk build of the year (``etl run`` at 1x,
  ``etl_scaling['1x']``) over the one-shot run's CPU-s stored in ``baseline-oneshot.json``
  (measured before that chain was removed; it can no longer be re-measured), scaled by the
  floor measured beside the bulk build over the floor measured beside the one-shot run, so a
  slower or faster machine does not move the ratio.
- ``training_shard_files``: shards a version lists (what training reads), flights after the
  night adding day 365, tiny after its bulk build.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench import measure, tiny
from bench.gcs_requests import gcs_nightly
from bench.objects import count_written

log = logging.getLogger("bench")
BASELINE = measure.REPO / "bench" / "baseline-oneshot.json"
FLIGHTS_FIRST = date(2013, 1, 1)
# (tiny bulk days, tiny nights, flights nights, GCS windows); --quick keeps the shapes, smaller
FULL = (tiny.DAYS, (30, 1000), (30, 365), (30, 365))
QUICK = (60, (10, 40), (3, 7), (3, 7))


def _end(first: date, days: int) -> str:
    return f"{(first + timedelta(days=days)).isoformat()}T00:00:00Z"


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in ("rows", "wall_s", "cpu_s", "peak_rss_mb", "version_uri")}


def shard_files(version_uri: str) -> dict[str, Any]:
    """Shard files a version lists per split: what its training opens."""
    from etl.versions import read_manifest

    splits = read_manifest(version_uri).splits
    per = {name: len(info.shards) for name, info in splits.items()}
    return {"per_split": per, "total": sum(per.values()),
            "bytes": sum(info.num_bytes for info in splits.values())}


def tiny_bulk(work: Path, days: int) -> dict[str, Any]:
    """The partitioned bulk build against the same rows as one file, in one fresh root."""
    folder = work / "tiny-bulk"
    shutil.rmtree(folder, ignore_errors=True)
    root = f"file://{folder}"
    tiny.land(root, days)
    env, end = tiny.specs_env(), _end(tiny.START, days)
    log.info("tiny: %d days as one file, then as %d one-row partitions", days, days)
    one = measure.etl_cli(root, end, dataset=tiny.ONE_FILE, env=env)
    bulk = measure.etl_cli(root, end, dataset=tiny.PARTITIONED,
                           env=env)
    return {"days": days, "bulk": _brief(bulk), "one_file": _brief(one),
            "tiny_partitions_bulk_ratio": bulk["cpu_s"] / one["cpu_s"],
            "tiny_partitions_bulk_wall_ratio": bulk["wall_s"] / one["wall_s"],
            "shard_files": shard_files(bulk["version_uri"])}


def nightly_objects(root: str, first: date, nights: tuple[int, ...], dataset: str,
                    env: dict[str, str] | None = None) -> dict[str, Any]:
    """For each N in ``nights`` (ascending, all landed): build to day N-1, then count what
    the night adding day N writes. Returns per N, and the last night's version."""
    out: dict[str, Any] = {}
    for n in nights:
        log.info("%s: history to day %d, then the night adding day %d", dataset, n - 1, n)
        measure.etl_cli(root, _end(first, n - 1), dataset=dataset,
                        env=env)
        cmd = [*measure.etl_command(root, _end(first, n), None, dataset), "--json"]
        counted = count_written(cmd, root, env)
        lists = ("listing_paths", "renamed_or_removed_paths")
        out[str(n)] = {k: v for k, v in counted.items() if k not in lists}
        out[str(n)]["new_files"] = counted["listing_paths"]["new"][:40]
    from etl import versions

    out["version_uri"] = versions.resolve(root, dataset, "latest")
    return out


def objects(work: Path, tiny_nights: tuple[int, int],
            flights_nights: tuple[int, int]) -> dict[str, Any]:
    """``objects_per_nightly_run`` on the tiny dataset and on flights."""
    folder = work / "tiny-nights"
    shutil.rmtree(folder, ignore_errors=True)
    tiny.land(f"file://{folder}", tiny_nights[-1], one_file=False)
    tiny_runs = nightly_objects(f"file://{folder}", tiny.START, tiny_nights, tiny.PARTITIONED,
                                tiny.specs_env())
    days = (FLIGHTS_FIRST.isoformat(),
            (FLIGHTS_FIRST + timedelta(days=flights_nights[-1])).isoformat())
    root = measure.fresh_flights_root(work, "flights-nights", days=days)
    flights_runs = nightly_objects(root, FLIGHTS_FIRST, flights_nights, "flights")
    figure = {f"{name}_day_{n}": runs[str(n)]["objects"]
              for name, runs, nights in (("tiny", tiny_runs, tiny_nights),
                                         ("flights", flights_runs, flights_nights))
              for n in nights}
    return {"tiny": tiny_runs, "flights": flights_runs, "objects_per_nightly_run": figure}


def oneshot_ratio(bulk_cpu_s: float, floor_cpu_s: float, quick: bool) -> dict[str, Any]:
    """The bulk build's CPU-s over the stored one-shot run's, scaled by the floors."""
    if not BASELINE.exists():
        return {"flights_bulk_oneshot_ratio": None, "why": f"{BASELINE.name} missing"}
    base = json.loads(BASELINE.read_text())["week" if quick else "year"]
    oneshot_now = base["oneshot_cpu_s"] / base["floor_cpu_s"] * floor_cpu_s
    return {"flights_bulk_oneshot_ratio": bulk_cpu_s / oneshot_now,
            "bulk_cpu_s": bulk_cpu_s, "floor_cpu_s": floor_cpu_s,
            "oneshot_cpu_s_scaled": oneshot_now, "baseline": base,
            "unscaled_ratio": bulk_cpu_s / base["oneshot_cpu_s"]}


def flights_oneshot(results: dict[str, Any], quick: bool) -> None:
    """``flights_bulk_oneshot_ratio`` from the 1x ETL run and its floor in ``results``."""
    one_x = results.get("etl_scaling", {}).get("1x")
    if one_x:
        results["flights_oneshot"] = oneshot_ratio(one_x["etl"]["cpu_s"],
                                                   one_x["floor"]["cpu_s"], quick)
        results["flights_bulk_oneshot_ratio"] = \
            results["flights_oneshot"]["flights_bulk_oneshot_ratio"]


def figures(work: Path, quick: bool, results: dict[str, Any],
            save: Callable[[], None] = lambda: None) -> None:
    """Every figure above, into ``results`` (``save`` after each part: a late failure keeps
    the earlier ones); ``results['etl_scaling']['1x']`` (the year's bulk build and its floor)
    supplies ``flights_bulk_oneshot_ratio``."""
    bulk_days, tiny_nights, flights_nights, windows = QUICK if quick else FULL
    flights_oneshot(results, quick)
    bulk = tiny_bulk(work, bulk_days)
    results.update(tiny_bulk=bulk, tiny_partitions_bulk_ratio=bulk["tiny_partitions_bulk_ratio"],
                   training_shard_files={"tiny": bulk["shard_files"]})
    save()
    counted = objects(work, tiny_nights, flights_nights)
    results.update(objects=counted, objects_per_nightly_run=counted["objects_per_nightly_run"])
    results["training_shard_files"]["flights"] = shard_files(counted["flights"]["version_uri"])
    save()
    for name in ("tiny-bulk", "tiny-nights", "flights-nights"):
        shutil.rmtree(work / name, ignore_errors=True)
    log.info("gcs: nightly flights runs through the counting proxy, windows %s", windows)
    gcs = gcs_nightly(windows)
    results.update(gcs=gcs, **{k: v for k, v in gcs.items() if k != "windows"})
    save()


def commit(*paths: str, at: str = "HEAD") -> str:
    """The checkout's commit, or with ``paths`` the last commit up to ``at`` that changed
    them."""
    cmd = ["git", "log", "-1", "--format=%H", at, "--", *paths] if paths else \
        ["git", "rev-parse", at]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=measure.REPO,
                          check=False).stdout.strip()
