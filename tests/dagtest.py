"""A fresh Airflow home for running the real DAG files with ``dag.test()`` in a subprocess."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
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
