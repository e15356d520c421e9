"""scripts/dag_test_logs.py: a ``dags test`` output cut into the task log files the UI reads.

The real round trip (a DAG run through ``scripts/demo.py``'s ``dag_test``, its log opened in
the Airflow UI) is in tests/e2e/test_ui_browser_operator.py; this covers retries and mapped tasks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from dag_test_logs import write_task_logs

RUN = "manual__2026-11-24T20:07:38.724244+00:00"


def _task(task: str, map_index: int, body: str) -> str:
    mapped = f"map_index={map_index} " if map_index >= 0 else ""
    return (f"2026-11-24T20:07:39.038700Z [info     ] [DAG TEST] starting task_id={task} "
            f"map_index={map_index} [airflow.sdk.definitions.dag]\n"
            f"2026-11-24T20:07:39.039486Z [info     ] [DAG TEST] running task <TaskInstance: "
            f"etl_flights.{task} {RUN} {mapped}[queued] ti_id=1> [airflow.sdk.definitions.dag]\n"
            f"{body}\n"
            f"2026-11-24T20:07:48.796773Z [info     ] [DAG TEST] end task task_id={task} "
            f"map_index={map_index} [airflow.sdk.definitions.dag]\n")


def test_each_attempt_lands_where_the_log_view_reads_it(tmp_path: Path) -> None:
    output = ("2026-11-24T20:07:30.000000Z [info     ] parsing the DAG file\n"
              + _task("build", -1, "Traceback (most recent call last):\nValueError: bad row")
              + _task("build", -1, "2026-11-24T20:07:45.000000Z [info     ] build flights: 1 segment")
              + _task("publish", 2, "2026-11-24T20:07:46.000000Z [warning  ] slow"))
    written = write_task_logs(output, tmp_path)
    base = f"dag_id=etl_flights/run_id={RUN}"
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        f"{base}/task_id=build/attempt=1.log", f"{base}/task_id=build/attempt=2.log",
        f"{base}/task_id=publish/map_index=2/attempt=1.log"]
    first = written[0].read_text().splitlines()
    assert json.loads(first[0])["event"].startswith("[DAG TEST] starting task_id=build")
    assert "Traceback (most recent call last):" in first  # not a record: kept as printed
    second = [json.loads(line) for line in written[1].read_text().splitlines()]
    assert {"timestamp": "2026-11-24T20:07:45.000000Z", "level": "info",
            "event": "build flights: 1 segment"} in second
    assert "parsing the DAG file" not in "".join(p.read_text() for p in written)
