"""DAG integrity: parsing, import hygiene, wiring, schedules, Params, and an end-to-end run.

Airflow reads AIRFLOW_HOME when it is first imported, so this module points it at a private
temporary home (SQLite) before anything imports airflow; parsing checks that must see a cold
interpreter (parse time, which modules got imported, no DB access) run in a subprocess.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
if "airflow" not in sys.modules:  # Airflow reads its home once, at first import.
    _HOME = Path(tempfile.mkdtemp(prefix="test-dags-airflow-"))
    os.environ.update({
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(_HOME / "plugins"),
    })

HEAVY = ("tensorflow", "keras", "dask", "distributed", "great_expectations", "gcsfs",
         "pandas", "pyarrow", "tfx_bsl", "training")
# The only project code a parse may load: where specs live and their scheduling keys (yaml).
LIGHT_ETL = {"etl", "etl.errors", "etl.log_redaction", "etl.spec", "etl.spec.labels",
             "etl.spec.load", "etl.spec.model", "etl.spec.scheduling"}
ALLOWED_TOP_LEVEL = ("__future__", "pendulum", "airflow.sdk", "flightpipe_dags")
DAG_FILES = sorted(p for p in DAGS.glob("*.py"))

# Runs in a fresh interpreter: an unreachable metadata DB, and Variables / connections /
# ORM sessions that raise, so any parse-time access shows up as an import error.
PARSE_SCRIPT = r"""
import json, sys, time
from pathlib import Path
def _forbidden(*a, **k):
    raise RuntimeError("parse-time access to the metadata DB, a Variable or a connection")
import airflow.settings as settings
from airflow.sdk import BaseHook, Connection, Variable
from airflow.models.variable import Variable as ModelVariable
Variable.get = ModelVariable.get = staticmethod(_forbidden)
BaseHook.get_connection = Connection.get = classmethod(_forbidden)
settings.Session = _forbidden
from airflow.dag_processing.dagbag import BundleDagBag
folder = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
cpu = {}
for path in sorted(folder.glob("*.py")):  # again, file by file, in CPU seconds
    for name in [m for m in sys.modules if m.split(".")[0] == "flightpipe_dags"]:
        sys.modules.pop(name)  # the dag-processor parses each file in a new process
    t0 = time.process_time()
    BundleDagBag(dag_folder=path, bundle_path=folder, bundle_name="dags-folder")
    cpu[path.name] = time.process_time() - t0
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print("PARSE_RESULT=" + json.dumps({
    "errors": bag.import_errors, "dags": sorted(bag.dags), "heavy": heavy, "cpu_s": cpu,
    "etl_modules": sorted(m for m in sys.modules if m.split(".")[0] == "etl"),
    "files": {Path(s.file).name: s.duration.total_seconds() for s in bag.dagbag_stats}}))
"""


def parse_in_subprocess(dags_dir: Path, **extra_env: str) -> dict:
    """Parse ``dags_dir`` like the dag-processor does, in a cold interpreter."""
    env = {**os.environ,
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////nonexistent-dir/unreachable.db",
           "AIRFLOW__CORE__DAGS_FOLDER": str(dags_dir), **extra_env}
    proc = subprocess.run([sys.executable, "-c", PARSE_SCRIPT, str(dags_dir), ",".join(HEAVY)],
                          check=False, env=env, capture_output=True, text=True, timeout=180)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PARSE_RESULT=")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("PARSE_RESULT="))


@pytest.fixture(scope="module")
def parsed() -> dict:
    return parse_in_subprocess(DAGS)


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=DAGS, bundle_path=DAGS, bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    return bag


@pytest.fixture(scope="module")
def common():
    if str(DAGS) not in sys.path:
        sys.path.append(str(DAGS))
    import flightpipe_dags

    return flightpipe_dags


def test_dag_files_parse_fast_without_db_or_heavy_imports(parsed: dict) -> None:
    assert parsed["errors"] == {}
    assert parsed["heavy"] == [], f"DAG parsing imported {parsed['heavy']}"
    assert set(parsed["etl_modules"]) <= LIGHT_ETL, parsed["etl_modules"]
    # CPU seconds, so a busy machine does not fail the test; wall time is in parsed["files"].
    slow = {f: s for f, s in parsed["cpu_s"].items() if s >= 0.5}
    assert not slow, f"DAG files should parse in well under a second: {slow}"
    helpers = {p.name for p in (DAGS / "flightpipe_dags").glob("*.py")}
    assert not helpers & set(parsed["files"]), ".airflowignore should skip the helper package"


def _top_level_imports(path: Path) -> list[str]:
    """Modules imported at module level, including under top-level if/try blocks."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


def _function_bodies_imports(path: Path) -> set[str]:
    inner: set[str] = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module:
                    inner.add(node.module)
                elif isinstance(node, ast.Import):
                    inner.update(a.name for a in node.names)
    return inner


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_module_level_imports_are_light(path: Path) -> None:
    inner = _function_bodies_imports(path)
    bad = []
    for name in set(_top_level_imports(path)) - inner:
        root = name.split(".")[0]
        ok = root in sys.stdlib_module_names or any(
            name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_TOP_LEVEL)
        if not ok or root in HEAVY:
            bad.append(name)
    assert not bad, f"{path.name} imports {bad} at module level; import them inside tasks"


def test_one_etl_and_one_training_dag_per_spec_and_a_score_dag_per_tabular_spec(
        dagbag, common) -> None:
    specs = sorted(p.parent.name for p in (REPO / "etl" / "examples").glob("*/spec.yaml"))
    assert specs and common.spec_names() == specs
    tabular = [s for s in specs if common.dataset_settings()[s].kind == "tabular"]
    assert "digits" in specs and "digits" not in tabular and "flights" in tabular
    expected = {f"{kind}_{s}" for s in specs for kind in ("etl", "train")}
    assert set(dagbag.dags) == expected | {f"score_{s}" for s in tabular}


def test_new_spec_needs_no_dag_code(tmp_path: Path) -> None:
    """Specs in folders outside the repo, named by PIPELINE_SPECS_PATH, get their DAGs."""
    folders = [tmp_path / "team_a", tmp_path / "team_b"]
    for folder, name in zip(folders, ("alpha", "beta_2"), strict=True):
        (folder / name).mkdir(parents=True)
        (folder / name / "spec.yaml").write_text(f"name: {name}\n")
    (folders[0] / "no_spec_here").mkdir()
    result = parse_in_subprocess(DAGS, PIPELINE_SPECS_PATH=os.pathsep.join(map(str, folders)))
    assert result["errors"] == {}
    assert result["dags"] == ["etl_alpha", "etl_beta_2", "score_alpha", "score_beta_2",
                              "train_alpha", "train_beta_2"]


def test_per_spec_scheduling_reaches_the_dags(tmp_path: Path) -> None:
    """schedule, start_date, catchup, owner and tags come from each spec; the env wins."""
    (tmp_path / "hourly").mkdir()
    (tmp_path / "hourly" / "spec.yaml").write_text(
        "name: hourly\nschedule: '30 * * * *'\nstart_date: 2024-03-01\ncatchup: true\n"
        "owner: ml-team\ntags: [wine, nightly]\ntraining: {epochs: 3, min_margin: 0.05}\n")
    (tmp_path / "manual").mkdir()
    (tmp_path / "manual" / "spec.yaml").write_text("name: manual\nschedule: none\n")
    script = PARSE_SCRIPT.replace('print("PARSE_RESULT="', 'print("DAGS=" + json.dumps({i: {'
        '"schedule": getattr(d.timetable, "expression", None), "start": d.start_date.isoformat(),'
        '"catchup": d.catchup, "tags": sorted(d.tags), "owner": d.owner} for i, d in '
        'bag.dags.items()}))\nprint("PARSE_RESULT="')
    env = {**os.environ, "PIPELINE_SPECS_PATH": str(tmp_path), "AIRFLOW__CORE__DAGS_FOLDER":
           str(DAGS), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////nonexistent/x.db"}
    env.pop("PIPELINE_ETL_SCHEDULE", None)
    proc = subprocess.run([sys.executable, "-c", script, str(DAGS), ""], env=env, text=True,
                          capture_output=True, timeout=180, check=False)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("DAGS=")]
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    dags = json.loads(line[-1].removeprefix("DAGS="))
    assert dags["etl_hourly"] == {"schedule": "30 * * * *", "catchup": True, "owner": "ml-team",
                                  "start": "2024-03-01T00:00:00+00:00",
                                  "tags": ["etl", "hourly", "nightly", "wine"]}
    assert dags["train_hourly"]["tags"] == ["hourly", "nightly", "training", "wine"]
    assert dags["train_hourly"]["start"] == "2024-03-01T00:00:00+00:00"
    assert dags["etl_manual"]["schedule"] is None  # none: manual runs only
    assert dags["etl_manual"]["start"] == "2013-01-02T00:00:00+00:00"  # the deployment default


def test_bad_or_duplicate_specs_fail_the_parse_naming_the_files(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder / "twin").mkdir(parents=True)
        (tmp_path / folder / "twin" / "spec.yaml").write_text("name: twin\n")
    result = parse_in_subprocess(
        DAGS, PIPELINE_SPECS_PATH=f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    message = " ".join(result["errors"].values())
    assert str(tmp_path / "a" / "twin" / "spec.yaml") in message
    assert str(tmp_path / "b" / "twin" / "spec.yaml") in message
    (tmp_path / "c" / "late").mkdir(parents=True)
    (tmp_path / "c" / "late" / "spec.yaml").write_text("name: late\nschedule: every day\n")
    result = parse_in_subprocess(DAGS, PIPELINE_SPECS_PATH=str(tmp_path / "c"))
    message = " ".join(result["errors"].values())
    assert "late/spec.yaml.schedule: expected a cron" in message


def _edges(dag) -> set[tuple[str, str]]:
    return {(t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids}


def test_etl_dag_wiring(dagbag, common) -> None:
    dag = dagbag.dags["etl_flights"]
    for dag_id in ("etl_flights", "etl_wine", "etl_digits"):  # one chain for every kind
        assert _edges(dagbag.dags[dag_id]) == {("wait_for_data", "build"), ("build", "publish")}, \
            dag_id
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression == "0 0 * * *" and str(dag.timetable.timezone) == "UTC"
    from flightpipe_dags.settings import ETL_ACTIVE_RUNS

    # a run waiting for late data holds no run of another window (issue 41 item 2)
    assert dag.catchup is False and dag.max_active_runs == ETL_ACTIVE_RUNS > 1
    assert dag.start_date == datetime(2013, 1, 2, tzinfo=UTC)
    assert dag.doc_md and dag.doc_md.startswith("# Dataset ETL")
    for task in dag.tasks:
        assert task.retries >= 1 and task.retry_exponential_backoff > 1
        assert task.max_retry_delay and task.execution_timeout, task.task_id
    heavy = {t.task_id for t in dag.tasks if t.pool == "dask"}
    assert heavy == {"build"}  # waiting for late data holds no dask slot
    assert dag.get_task("wait_for_data").wait == timedelta(hours=6)  # the default
    publish = dag.get_task("publish")
    # a refused night must not hold later ones (issue 34); storage keeps the order
    assert not publish.depends_on_past
    assert [o.name for o in publish.outlets] == ["dataset_flights"]
    assert publish.outlets[0].uri == common.dataset_asset("flights").uri


def test_training_dag_is_scheduled_on_the_etl_asset_and_routed_to_gpu(dagbag) -> None:
    from flightpipe_dags.settings import ASSET_ACTIVE_RUNS
    from flightpipe_dags.settings import model_asset as fd_model_asset

    etl, train = dagbag.dags["etl_flights"], dagbag.dags["train_flights"]
    # partitioned whatever the spec's schedule (flights: nightly): a run per keyed publish
    assert type(train.timetable).__name__ == "PartitionedAssetTimetable"
    assert [train.timetable.asset_condition] == etl.get_task("publish").outlets
    assert _edges(train) == {("resolve_version", "train"), ("train", "announce_model")}
    assert train.get_task("announce_model").outlets == [fd_model_asset("flights")]
    assert train.max_active_runs == ASSET_ACTIVE_RUNS > 1  # a run per publish: none unlinked
    gpu_task = train.get_task("train")
    assert (gpu_task.queue, gpu_task.pool) == ("gpu", "gpu")
    resolve = train.get_task("resolve_version")
    assert (resolve.queue, resolve.pool) == ("default", "default_pool")


def test_score_dag_runs_after_each_publish_on_the_gpu_queue(dagbag) -> None:
    from flightpipe_dags.settings import ASSET_ACTIVE_RUNS
    from flightpipe_dags.settings import model_asset as fd_model_asset

    etl, score = dagbag.dags["etl_flights"], dagbag.dags["score_flights"]
    assert type(score.timetable).__name__ == "PartitionedAssetTimetable"
    assert type(score.timetable.asset_condition).__name__ == "AssetAny"  # either one's event
    assert list(score.timetable.asset_condition.objects) == [
        *etl.get_task("publish").outlets, fd_model_asset("flights")]  # each publish, each promotion
    assert set(score.task_ids) == {"score"}
    task = score.get_task("score")
    assert (task.queue, task.pool) == ("gpu", "gpu")
    assert [link.name for link in task.operator_extra_links] == ["Predictions page"]
    assert score.params["version"] == "latest" and score.params["raw"] == []
    assert "null" in score.params.get_param("raw").schema["type"]  # optional in the form
    assert score.max_active_runs == ASSET_ACTIVE_RUNS and "scoring" in score.tags


def test_every_task_retries_only_transient_failures(dagbag, common) -> None:
    """One policy for every task of every DAG (issue 51): a deterministic failure fails at
    once, a transient one keeps the task's retries (flightpipe_dags/failures.py)."""
    from flightpipe_dags.failures import RETRY_POLICY

    tasks = [(dag_id, t) for dag_id, dag in dagbag.dags.items() for t in dag.tasks]
    assert {d.split("_")[0] for d, _ in tasks} == {"etl", "train", "score"}
    assert all(t.retry_policy is RETRY_POLICY and t.retries >= 1 for _, t in tasks), [
        (d, t.task_id) for d, t in tasks if t.retry_policy is not RETRY_POLICY]


def test_params_have_titles_and_valid_defaults(dagbag) -> None:
    for dag_id in ("etl_flights", "train_flights"):
        params = dagbag.dags[dag_id].params
        params.validate()
        for key in params:
            param = params.get_param(key)
            assert param.schema.get("title") and param.description, (dag_id, key)


# The schema holds every range, pattern and choice: create_dagrun refuses these before a run
# exists (tests/integration/test_trigger_refusals.py does it through the real REST API and form).
BAD_ETL = [
    {"window_days": "7"}, {"compression": "zip"}, {"validation_mode": "lenient"},
    {"compression": "gzip"}, {"force_republish": "yes"},
    {"window_days": 0}, {"window_days": 3661}, {"shard_mb": -5}, {"shard_mb": 4097},
    {"source_uri": "../../etc passwd"}, {"source_uri": "raw/../../x"},
    {"source_uri": "/etc/passwd"}, {"source_uri": "ftp://host/raw"}, {"source_uri": "s3:/x"},
    {"interval_end": "2014-13-45"}, {"interval_end": "yesterday"},
    {"interval_end": "2013-01-05 25:00"},
]
BAD_TRAIN = [{"version": 1}, {"epochs": "many"}, {"batch_size": 1.5}, {"min_margin": "x"},
             {"version": "v1"}, {"epochs": 0}, {"epochs": 1001}, {"batch_size": -1},
             {"min_margin": 0.5}, {"min_margin": -0.1}]


@pytest.fixture(scope="module")
def scheduler_params(dagbag):
    """Params as the scheduler/API server hold them: after a serialization round trip."""
    from airflow.serialization.serialized_objects import DagSerialization

    def params(dag_id: str):
        dag = dagbag.dags[dag_id]
        return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params

    return params


@pytest.mark.parametrize(("dag_id", "conf"), [("etl_flights", c) for c in BAD_ETL]
                         + [("train_flights", c) for c in BAD_TRAIN], ids=str)
def test_bad_param_values_are_rejected(scheduler_params, dag_id: str, conf: dict) -> None:
    """The same check ``create_dagrun`` does before a run (and so any task) exists."""
    from airflow.sdk.exceptions import ParamValidationError

    merged = scheduler_params(dag_id).deep_merge(conf)
    with pytest.raises(ParamValidationError, match=f"param {next(iter(conf))}"):
        merged.validate()


GOOD_ETL = [{"interval_end": "2013-01-05T00:00:00+00:00", "window_days": 3},
            {"interval_end": "2013-01-05"}, {"interval_end": ""},
            {"compression": "GZIP", "validation_mode": "strict", "force_republish": True},
            {"source_uri": "gs://bucket/raw/flights/date={date}/flights.csv", "shard_mb": 8},
            {"source_uri": "raw/flights/date={date}/flights.csv", "compression": None},
            {"window_days": 1, "shard_mb": 4096}, {"interval_end": "2013-01-05T06:00:00.000Z"},
            {"interval_end": "2013-01-05 06:00"}]


@pytest.mark.parametrize("conf", GOOD_ETL, ids=str)
def test_good_param_values_pass(scheduler_params, conf: dict) -> None:
    resolved = scheduler_params("etl_flights").deep_merge(conf).validate()
    assert {k: resolved[k] for k in conf} == conf


def _defaults(common) -> dict:
    return {k: p.value for k, p in common.etl_params().items()}


def test_resolve_options_prefers_param_then_interval_then_run_after(common) -> None:
    day = datetime(2013, 1, 3, tzinfo=UTC)
    run_after = datetime(2013, 1, 3, 2, 5, tzinfo=UTC)
    params = _defaults(common)
    root = "file:///r"
    assert common.resolve_etl_options(params, day, run_after, root).interval_end == day
    assert common.resolve_etl_options(params, None, run_after, root).interval_end == run_after
    override = {**params, "interval_end": "2013-01-05T06:00:00", "window_days": 2}
    opts = common.resolve_etl_options(override, day, run_after, root)
    assert opts.interval_end == datetime(2013, 1, 5, 6, tzinfo=UTC)
    assert opts.interval_start == datetime(2013, 1, 3, 6, tzinfo=UTC)
    assert opts.shard_bytes is None and opts.compression is None  # the spec decides
    assert type(opts.interval_end) is datetime and type(opts.interval_start) is datetime
    gz = common.resolve_etl_options({**params, "compression": "GZIP", "shard_mb": 2}, day, None,
                                    root)
    assert (gz.compression, gz.shard_bytes, gz.interval_start) == ("gzip", 2 * 2**20, None)
    assert common.resolve_etl_options({**params, "compression": "none"}, day, None,
                                      root).compression == "none"


def test_a_training_run_folder_is_named_by_its_run(common) -> None:
    assert common.run_name("manual__2013-01-04T00:00:00+00:00") == "manual__2013-01-04T00_00_00_00_00"


def test_storage_root_and_asset_follow_the_environment(common, monkeypatch) -> None:
    monkeypatch.setenv("PIPELINE_STORAGE_ROOT", "gs://bucket/prefix/")
    asset = common.dataset_asset("flights")
    assert (asset.name, asset.uri) == ("dataset_flights", "gs://bucket/prefix/datasets/flights")
    monkeypatch.delenv("PIPELINE_STORAGE_ROOT")
    assert common.storage_root() == f"file://{REPO / '.data'}"


def test_etl_schedule_can_be_overridden_or_switched_off(common, monkeypatch) -> None:
    monkeypatch.setenv("PIPELINE_ETL_SCHEDULE", "0 2 * * *")
    assert common.etl_timetable().expression == "0 2 * * *"
    monkeypatch.setenv("PIPELINE_ETL_SCHEDULE", "none")
    assert common.etl_timetable() is None
    assert common.etl_timetable("15 3 * * *") is None  # the deployment override wins
    monkeypatch.delenv("PIPELINE_ETL_SCHEDULE")
    assert common.etl_timetable().expression == "0 0 * * *"
    assert common.etl_timetable("15 3 * * *").expression == "15 3 * * *"  # the spec's
    assert common.etl_timetable("none") is None


def test_interval_start_is_window_before_end(common) -> None:
    opts = common.resolve_etl_options({**_defaults(common), "window_days": 7},
                                      datetime(2013, 2, 1, tzinfo=UTC), None, "file:///r")
    assert opts.interval_end - opts.interval_start == timedelta(days=7)


def test_incremental_must_be_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "c" / "inc").mkdir(parents=True)
    (tmp_path / "c" / "inc" / "spec.yaml").write_text("name: inc\nincremental: nightly\n")
    result = parse_in_subprocess(DAGS, PIPELINE_SPECS_PATH=str(tmp_path / "c"))
    message = " ".join(result["errors"].values())
    assert "inc/spec.yaml.incremental: expected true or false, got 'nightly'" in message


def test_a_spec_still_setting_incremental_parses_with_a_deprecation_line(tmp_path: Path) -> None:
    """The retired key keeps old specs loading (any kind) and says once what to do."""
    (tmp_path / "c" / "pics").mkdir(parents=True)
    (tmp_path / "c" / "pics" / "spec.yaml").write_text("name: pics\nkind: images\n"
                                                      "incremental: true\n")
    result = parse_in_subprocess(DAGS, PIPELINE_SPECS_PATH=str(tmp_path / "c"))
    assert not result["errors"] and {"etl_pics", "train_pics"} <= set(result["dags"])


@pytest.mark.parametrize("folder", ["dags", "plugins"])
def test_airflow_lists_the_folders_without_a_deprecation_warning(folder: str) -> None:
    """Issue 41 item 8: Airflow's ``.airflowignore`` reader (glob syntax) warned in every task
    log that pathspec's GitWildMatchPattern is deprecated (pathspec >= 1.0; pinned below).
    The ignore files still keep the shared package and the UI's modules out of the listing."""
    import warnings

    from airflow.sdk._shared.module_loading.file_discovery import find_path_from_directory

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        listed = sorted(Path(p).relative_to(REPO / folder).as_posix() for p in
                        find_path_from_directory(REPO / folder, ".airflowignore", "glob")
                        if p.endswith(".py"))
    assert listed == {"dags": ["dataset_etl.py", "dataset_scoring.py", "dataset_training.py"],
                      "plugins": ["flightpipe_arrival.py", "pipeline_ui_plugin.py"]}[folder]
