"""A nightly flights run on a GCS bucket, counted request by request (issue 25).

On a bucket the number of requests, not bytes, sets a small run's cost and wall time. The
run goes through ``python -m etl run`` against the GCS JSON-API emulator (the project's test
double, which honours ``ifGenerationMatch``) with a loopback proxy in front that passes every
request on and logs it. History is built straight against the emulator (not counted), a month
a run (``HISTORY_STEP``); only the nightly run goes through the proxy.

``gcs_nightly_requests``: the night that adds day N to a dataset of N-1 days, N = 30 and 365
(``--quick``: 3 and 7). ``gcs_nightly_wall_s_at_30ms``: on the 30-day bucket, the next night
(day N+1) with 30 ms added before each request is passed on, beside the 0 ms night's wall.

This is the one module that imports the test doubles (``tests/support/gcs.py``,
``tests/support/faultproxy.py``): repoint ``_doubles`` when they move.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections import Counter
from dataclasses import replace
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from bench import measure
from bench.proctree import run_checked

log = logging.getLogger("bench")
BUCKET = "bench"
FIRST_DAY = date(2013, 1, 1)
DELAY_S = 0.03
# History is built a month a run: a year in one run opens more connections than the emulator
# (one request at a time) accepts, and the client's retries then thrash for half an hour.
HISTORY_STEP = 31
_LIST = re.compile(r"/b/[^/]+/o/?$")


def _doubles() -> tuple[Any, Any, Any]:
    """(GcsEmulator, FaultProxy, NO_FAULTS) from the tests' doubles."""
    if str(measure.REPO) not in sys.path:
        sys.path.insert(0, str(measure.REPO))
    from tests.support.faultproxy import NO_FAULTS, FaultProxy
    from tests.support.gcs import GcsEmulator

    return GcsEmulator, FaultProxy, NO_FAULTS


def classify(request: str) -> str:
    """What a logged JSON-API request (``"METHOD /path?query"``) does: list, metadata, read,
    upload (a new object; ``upload_part`` continues one), copy, delete, batch, update, other."""
    method, _, target = request.partition(" ")
    parts = urlsplit(target)
    path, query = parts.path, parse_qs(parts.query)
    if path.startswith("/upload/"):
        return "upload" if method == "POST" else "upload_part"
    if path.startswith("/batch/"):
        return "batch"
    if "/copyTo/" in path or "/rewriteTo/" in path or path.endswith("/compose"):
        return "copy"
    if method == "DELETE":
        return "delete"
    if method == "GET":
        if path.startswith("/download/") or query.get("alt") == ["media"]:
            return "read"
        return "list" if _LIST.search(path) else "metadata" if "/o/" in path else "other"
    return "update" if method in ("PATCH", "PUT") else "other"


def summarize(seen: list[str]) -> dict[str, Any]:
    """Request counts by kind; objects written = uploads started + copies."""
    kinds = Counter(classify(r) for r in seen)
    return {"requests": len(seen), "by_kind": dict(sorted(kinds.items())),
            "objects_written": kinds["upload"] + kinds["copy"]}


def _day(n: int) -> str:
    return (FIRST_DAY + timedelta(days=n)).isoformat()


def _env(endpoint: str, root: str) -> dict[str, str]:
    return {**os.environ, "STORAGE_EMULATOR_HOST": endpoint, "PIPELINE_STORAGE_ROOT": root}


def _night(proxy_cls: Any, plan: Any, upstream: str, root: str, day_n: int) -> dict[str, Any]:
    """The run adding day ``day_n`` (1-based) through a fresh counting proxy."""
    with proxy_cls(upstream, plan) as proxy:
        run = measure.etl_cli(root, f"{_day(day_n)}T00:00:00Z",
                              env=_env(proxy.endpoint, root))
        seen = list(proxy.counters.seen)
    night = {**summarize(seen), "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
             "day": _day(day_n - 1), "delay_s": plan.delay_s}
    log.info("gcs: night adding day %d (%.0f ms added): %d requests %s, %.1f s", day_n,
             plan.delay_s * 1000, night["requests"], night["by_kind"], night["wall_s"])
    return night


def _bucket(emulator: Any, proxy_cls: Any, plan: Any, days: int, extra: int) -> dict[str, Any]:
    """Land ``days + extra`` days, build days 1..N-1 uncounted, count the night adding N."""
    root = f"gs://{BUCKET}/w{days}"
    env = _env(emulator.endpoint, root)
    run_checked([sys.executable, "-m", "etl", "land", "--root", root, "--dataset", "flights",
                 "--start-day", _day(0), "--end-day", _day(days + extra)],
                env=env, cwd=measure.REPO)
    log.info("gcs: history of %d days on the emulator, %d days a run", days - 1, HISTORY_STEP)
    history = [measure.etl_cli(root, f"{_day(min(end, days - 1))}T00:00:00Z",
                               env=env)
               for end in range(HISTORY_STEP, days - 1 + HISTORY_STEP, HISTORY_STEP)]
    log.info("gcs: the night adding day %d, counted", days)
    out = {"history": {"runs": len(history), "rows": history[-1]["rows"],
                       **{k: sum(h[k] for h in history) for k in ("wall_s", "cpu_s")}},
           "night": _night(proxy_cls, plan, emulator.endpoint, root, days)}
    if extra:
        log.info("gcs: the next night with %.0f ms added per request", DELAY_S * 1000)
        out["night_delayed"] = _night(proxy_cls, replace(plan, delay_s=DELAY_S),
                                      emulator.endpoint, root, days + 1)
    return out


def gcs_nightly(windows: tuple[int, int] = (30, 365)) -> dict[str, Any]:
    """The figures above for a short and a long history (days), on one emulator."""
    emulator_cls, proxy_cls, plan = _doubles()
    short, long = windows
    with emulator_cls(buckets=(BUCKET,)) as emulator:
        runs = {f"{short}d": _bucket(emulator, proxy_cls, plan, short, extra=1),
                f"{long}d": _bucket(emulator, proxy_cls, plan, long, extra=0)}
    counts = [runs[k]["night"]["requests"] for k in runs]
    delayed = runs[f"{short}d"]["night_delayed"]
    return {"windows": runs,
            "gcs_nightly_requests": {k: runs[k]["night"]["requests"] for k in runs},
            "gcs_nightly_requests_spread": max(counts) / min(counts) - 1,
            "gcs_nightly_wall_s_at_30ms": delayed["wall_s"],
            "gcs_nightly_wall_s_at_0ms": runs[f"{short}d"]["night"]["wall_s"],
            "gcs_nightly_requests_at_30ms": delayed["requests"]}
