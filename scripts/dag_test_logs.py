"""Put an ``airflow dags test`` run's task logs where the Airflow UI reads them.

``dags test`` runs every task in its own process and prints the task logs to stdout only; the
UI's task log view then says "Log file not found". This cuts that output per task attempt at
Airflow's ``[DAG TEST] starting task_id=...`` / ``[DAG TEST] end task`` markers and writes
each part to ``$AIRFLOW_HOME/logs/`` under Airflow's default ``log_filename_template``
(``dag_id=<dag>/run_id=<run>/task_id=<task>/[map_index=<i>/]attempt=<n>.log``), as a worker
would. A line as Airflow prints it (``<timestamp> [<level>] <message>``) is stored as the JSON
record a worker writes, so the UI shows its time and level once; other lines (a traceback)
as printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
# "[DAG TEST] running task <TaskInstance: etl_flights.build manual__2026-...+00:00 [queued] ...>"
RUNNING = re.compile(r"\[DAG TEST\] running task <TaskInstance: (\S+?)\.(\S+) (\S+) ")
END = "[DAG TEST] end task"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RECORD = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z) \[(\w+)\s*\] (.*)$")


@dataclass
class TaskLog:
    """One task attempt's lines as ``dags test`` printed them."""

    task_id: str
    map_index: int
    attempt: int
    dag_id: str = ""
    run_id: str = ""
    lines: list[str] = field(default_factory=list)

    def relpath(self) -> Path:
        mapped = f"map_index={self.map_index}/" if self.map_index >= 0 else ""
        return Path(f"dag_id={self.dag_id}/run_id={self.run_id}/task_id={self.task_id}/"
                    f"{mapped}attempt={self.attempt}.log")


def split_tasks(output: str) -> list[TaskLog]:
    """Each task attempt in a ``dags test`` output, in order, with its dag and run id."""
    parts: list[TaskLog] = []
    attempts: dict[tuple[str, int], int] = {}
    current: TaskLog | None = None
    for raw in output.splitlines():
        line = ANSI.sub("", raw)
        if m := START.search(line):
            key = (m[1], int(m[2]))
            attempts[key] = attempts.get(key, 0) + 1
            current = TaskLog(m[1], int(m[2]), attempts[key])
            parts.append(current)
        if current is None:
            continue
        if not current.run_id and (m := RUNNING.search(line)):
            current.dag_id, current.run_id = m[1], m[3]
        current.lines.append(line)
        if END in line:
            current = None
    return [p for p in parts if p.run_id]


def write_task_logs(output: str, logs_folder: Path) -> list[Path]:
    """Write each task attempt of ``output`` under ``logs_folder``; the paths written."""
    written = []
    for part in split_tasks(output):
        path = logs_folder / part.relpath()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(_record(line) + "\n" for line in part.lines), encoding="utf-8")
        written.append(path)
    return written


def _record(line: str) -> str:
    if m := RECORD.match(line):
        return json.dumps({"timestamp": m[1], "level": m[2], "event": m[3]})
    return line
