"""What each worker of a Dask cluster has executed, as JSON (run inside the compose network).

`make compose-test` feeds this file to ``python -`` in a pipeline-cli container after the ETL
ran on the ``dask`` profile, and check.py judges the answer:

    python - tcp://dask-scheduler:8786 2 < docker/compose-test/dask_probe.py

Prints ``{worker address: {"hostname": ..., "tasks": {key prefix: tasks executed}}}`` once
the scheduler has at least the given number of workers. A worker's own stimulus log is read
(``ExecuteSuccessEvent``: a task it computed), not the scheduler's, so a task counts only
where it really ran; the prefix is the key's function name (``build_segments-<token>``).
"""

from __future__ import annotations

import json
import socket
import sys
from collections import Counter
from typing import Any

WAIT_FOR_WORKERS_S = 180


def executed(dask_worker: Any) -> dict[str, Any]:
    """On one worker: its hostname (the container's) and the tasks it computed, by prefix."""
    from dask.utils import key_split

    done = Counter(key_split(ev.key) for ev in dask_worker.state.stimulus_log
                   if type(ev).__name__ == "ExecuteSuccessEvent")
    return {"hostname": socket.gethostname(), "tasks": dict(done)}


def report(address: str, workers: int, timeout_s: float = WAIT_FOR_WORKERS_S) -> dict[str, Any]:
    from distributed import Client

    with Client(address, timeout=timeout_s) as client:
        client.wait_for_workers(workers, timeout=timeout_s)
        return client.run(executed)


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1], int(sys.argv[2])), sort_keys=True))
