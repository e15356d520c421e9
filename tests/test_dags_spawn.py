"""``spawnable_main``: worker processes must start from inside a LocalExecutor task.

In an Airflow 3 task process the ``airflow`` CLI script is ``__main__`` and the DB URL is
blocked; a child started with spawn (or forkserver, which prepares children the same way)
re-runs that script and dies, which made every Dask step of ``etl_<name>`` fail under
``airflow standalone``. Here a script that exits when re-run stands in for the CLI.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parent.parent / "dags"
if "airflow" not in sys.modules:  # Airflow reads its home once, at first import.
    _HOME = Path(tempfile.mkdtemp(prefix="test-dags-spawn-airflow-"))
    os.environ.update({"AIRFLOW_HOME": str(_HOME),
                       "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
                       "AIRFLOW__CORE__LOAD_EXAMPLES": "False"})


def _child_exitcode() -> int | None:
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    child.start()
    child.join(120)
    return child.exitcode


def test_spawned_children_do_not_rerun_the_airflow_script(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if str(DAGS) not in sys.path:
        monkeypatch.syspath_prepend(str(DAGS))
    from _common import spawnable_main

    script = tmp_path / "airflow"  # a script path, like the console entry point
    script.write_text('raise SystemExit("re-ran the parent\'s main script")\n')
    fake_main = types.ModuleType("__main__")
    fake_main.__file__, fake_main.__spec__ = str(script), None
    monkeypatch.setitem(sys.modules, "__main__", fake_main)

    assert _child_exitcode() == 1  # the failure the fix is for is real
    with spawnable_main():
        assert _child_exitcode() == 0
    assert fake_main.__file__ == str(script)  # restored for whatever runs next
