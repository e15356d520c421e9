"""A fresh Airflow home for running the real DAG files with ``dag.test()`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"


def airflow_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """(environment, storage root URI): SQLite metadata DB, our DAGs folder, no emulator."""
    root = f"file://{tmp_path / 'data'}"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "PIPELINE_STORAGE_ROOT": root,
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
           "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
           "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("STORAGE_EMULATOR_HOST", None)
    return env, root


def prepare(env: dict[str, str], *commands: list[str]) -> None:
    """Migrate the fresh metadata DB, then run each setup command (e.g. ``etl land``)."""
    airflow = str(Path(sys.executable).parent / "airflow")
    for args in ([airflow, "db", "migrate"], *commands):
        proc = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]


def run_script(script: str, env: dict[str, str], etl_conf: dict, train_conf: dict,
               timeout: int) -> dict:
    """Run a dag.test() script over our DAGs; it prints ``E2E_RESULT=<json>`` last."""
    proc = subprocess.run([sys.executable, "-c", script, str(DAGS), json.dumps(etl_conf),
                           json.dumps(train_conf)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("E2E_RESULT=")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-6000:]
    return json.loads(lines[-1].removeprefix("E2E_RESULT="))
