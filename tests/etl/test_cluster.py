"""The LocalCluster a step starts: preloaded forked workers that still see the step's environment."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from etl import cluster
from etl.kinds.landing import LandOptions

pytestmark = pytest.mark.skipif(
    "forkserver" not in __import__("multiprocessing").get_all_start_methods(),
    reason="no forkserver start method on this platform",
)


@pytest.fixture(autouse=True)
def _no_active_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another module's client may still be the default one: these tests need their own cluster."""
    monkeypatch.setattr(cluster, "_active_client", lambda: None)


def _worker_facts() -> dict[str, object]:
    return {"env": os.environ.get("FLIGHTPIPE_CLUSTER_PROBE"),
            "preloaded": "etl.validation.gx" in sys.modules,
            "parent": os.getppid()}


def test_workers_are_preloaded_and_get_the_current_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = cluster.ClusterConfig(n_workers=1)
    monkeypatch.setenv("FLIGHTPIPE_CLUSTER_PROBE", "first")
    with cluster.dask_client(config=config) as client:
        first = list(client.run(_worker_facts).values())
    # The forkserver started above keeps its environment; a later cluster must not inherit it.
    monkeypatch.setenv("FLIGHTPIPE_CLUSTER_PROBE", "second")
    with cluster.dask_client(config=config) as client:
        second = list(client.run(_worker_facts).values())
    assert [f["env"] for f in first] == ["first"]
    assert [f["env"] for f in second] == ["second"]
    assert all(f["preloaded"] for f in first + second), "workers imported the ETL modules anew"
    assert first[0]["parent"] == second[0]["parent"] != os.getpid(), "not forked from one server"


def test_spawn_when_preload_is_empty() -> None:
    with cluster.dask_client(config=cluster.ClusterConfig(n_workers=1, preload=())) as client:
        facts = list(client.run(_worker_facts).values())
    assert not facts[0]["preloaded"]


def test_peak_rss_counts_children_memory_and_cpu() -> None:
    burn = "x = bytearray(300 * 2**20); import time; t = time.process_time()\n" \
           "while time.process_time() - t < 0.6: pass"
    with cluster.PeakRSS(period_s=0.02) as rss:
        subprocess.run([sys.executable, "-c", burn], check=True)
    assert rss.peak_bytes > 300 * 2**20
    assert rss.cpu_seconds >= 0.5


def _child_exitcode() -> int | None:
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    child.start()
    child.join(120)
    return child.exitcode


def test_spawned_children_do_not_rerun_a_main_script(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """In a LocalExecutor task ``__main__`` is the ``airflow`` script, which dies when re-run
    in a child (blocked DB URL); a script that exits when re-run stands in for it."""
    script = tmp_path / "airflow"  # a script path, like the console entry point
    script.write_text('raise SystemExit("re-ran the parent\'s main script")\n')
    fake_main = types.ModuleType("__main__")
    fake_main.__file__, fake_main.__spec__ = str(script), None
    monkeypatch.setitem(sys.modules, "__main__", fake_main)

    assert _child_exitcode() == 1  # the failure the fix is for is real
    with cluster.spawnable_main():
        assert _child_exitcode() == 0
    assert fake_main.__file__ == str(script)  # restored for whatever runs next


class _NoCluster(RuntimeError):
    """Raised by a LocalCluster that must not start."""


def _forbid_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise _NoCluster("a LocalCluster was started")
    import distributed

    monkeypatch.setattr(distributed, "LocalCluster", refuse)


def test_which_work_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cluster.DASK_ADDRESS_ENV, raising=False)
    assert cluster.in_process(0) and cluster.in_process(cluster.IN_PROCESS_BYTES)
    assert not cluster.in_process(cluster.IN_PROCESS_BYTES + 1)
    assert not cluster.in_process(None), "an unknown size gets a cluster"
    assert not cluster.in_process(10, address="tcp://127.0.0.1:8786")
    monkeypatch.setenv(cluster.DASK_ADDRESS_ENV, "tcp://127.0.0.1:8786")
    assert not cluster.in_process(10), "a named scheduler always wins"


def test_small_work_computes_on_threads_and_nested_steps_stay_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dask

    monkeypatch.delenv(cluster.DASK_ADDRESS_ENV, raising=False)
    _forbid_clusters(monkeypatch)
    with cluster.dask_client(work_bytes=1000) as client:
        assert client is None
        assert dask.config.get("scheduler") == "threads"
        assert dask.config.get("num_workers") == cluster.IN_PROCESS_THREADS
        with cluster.dask_client() as inner:  # a step of `etl run` that does not know the size
            assert inner is None
    # outside it, unknown work gets its cluster again
    with pytest.raises(_NoCluster), cluster.dask_client():
        pass


def test_a_one_day_run_starts_no_cluster_and_a_large_one_does(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The size the cluster decision sees is the raw bytes of the segments to build."""
    from datetime import date

    from etl import pipeline, storage, versions
    from etl.kinds.tabular.land import land

    monkeypatch.delenv(cluster.DASK_ADDRESS_ENV, raising=False)
    _forbid_clusters(monkeypatch)
    sizes: list[int | None] = []
    real = cluster.dask_client

    def spy(*args: object, **kwargs: object) -> object:
        sizes.append(kwargs.get("work_bytes"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cluster, "dask_client", spy)
    root = tmp_path.as_uri()
    land(root, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 3)))
    result = pipeline.run("flights", root, "2013-01-02", "2013-01-01", run_id="small")
    assert result.created and sum(result.splits.values()) > 600
    files = versions.read_manifest(result.version_uri).sources.files
    day = sum(p.stat().st_size for p in (tmp_path / "raw").rglob("*")
              if p.is_file() and "2013-01-01" in str(p))
    assert sizes == [sum(f["size"] for f in files)] and 0 < sizes[0] <= day, (sizes, day)
    again = pipeline.run("flights", root, "2013-01-02", "2013-01-01", run_id="again",
                         force=True)
    assert again.created and sizes == sizes[:1], "its segment was built again"
    monkeypatch.setattr(cluster, "IN_PROCESS_BYTES", 1000)
    with pytest.raises(_NoCluster):
        pipeline.run("flights", root, "2013-01-03", "2013-01-02", run_id="large")
    assert storage.exists(result.version_uri)
