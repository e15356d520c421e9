"""land and run: what the ETL DAG does, from one process.

``run`` is ``build_version`` then ``publish`` -- the ETL DAG's two tasks -- with the same
options; a small window is built by this process's threads, a large one on a Dask cluster
started for it (``etl.cluster``).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from etl import kinds
from etl.pipeline.build import build_version
from etl.pipeline.publish import publish
from etl.pipeline.record import RunOptions


def land(root: str, dataset: str = "flights", **kwargs: Any) -> str:
    """Land a dataset's upstream files into ``<root>/raw``; returns the raw zone URI."""
    return kinds.land(root, dataset, **kwargs).raw_uri


def run(spec_name: str, root: str, interval_end: str | datetime,
        interval_start: str | datetime | None = None, run_id: str | None = None,
        options: RunOptions | None = None, **fields: Any) -> dict[str, Any]:
    """Build and publish the version of [start, end); returns what ``publish`` returns.

    ``fields``: ``RunOptions`` fields, for callers that set one or two (``force=True``).
    """
    t0 = time.monotonic()
    options = options or RunOptions(**fields)
    result = publish(build_version(spec_name, root, interval_end, interval_start, run_id,
                                   options))
    result["wall_s"] = round(time.monotonic() - t0, 3)
    return result
