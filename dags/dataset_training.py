"""# Dataset training: newest published version -> Keras model on the GPU queue

One DAG per dataset spec, id `train_<name>`, scheduled on the dataset Asset
(`dataset_<name>`) that the ETL DAG's `publish` task updates (for a `schedule: partitioned`
spec, a partitioned timetable: one run per published version, each partition-keyed). A burst
of versions (a backfill, 30 announced days) trains once per version at most, one run at a
time, and a run skips when a newer version was published after its events (the later run
trains it) or its version was already trained (`flightpipe_dags/choice.py`).

| task | runs on | does | returns (XCom) |
| --- | --- | --- | --- |
| `resolve_version` | default queue | picks the version: the newest one carried by the triggering Asset events (by `etl.versions.version_key`, the one order of versions; the older ones are not trained separately), else the `version` Param (`latest` or an id); refuses a version without a manifest; skips (with `train`) an event's version that another run already trained ("already trained by run X"), or when a newer untrained version was published after the run's events (the later run its event starts trains it) | `{version, version_uri}` |
| `train` | `gpu` queue, `gpu` pool | tf.data pipeline over the shards, Keras model, writes model + metrics + verdict (with this DAG run's `dag_id`/`run_id`) under `models/<name>/<version>/<run>/`; a blessed model no worse than the current one becomes `models/<name>/current.json`; its "Model page" button opens the model | `{model_uri, metrics, blessing, promoted}` |

The `gpu` pool has one slot per GPU, so trainings never share a device; the `gpu` queue
is consumed only by the Celery worker that owns the GPUs (`airflow celery worker --queues gpu`).
Training settings come from the spec's `training` block (`epochs`, `batch_size`,
`learning_rate`, `hidden_units`, `min_margin`, ...), else the training defaults; a manual
run's trigger form (`epochs`, `batch_size`, `min_margin`, `fail_unblessed`) overrides both.
The task logs the gate's verdict; a not-blessed model leaves the task green (it is written,
not promoted) unless `fail_unblessed` is set.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, dag, get_current_context, task
from flightpipe_dags import (
    GPU_POOL,
    GPU_QUEUE,
    DagSettings,
    choice,
    dag_defaults,
    dataset_asset,
    dataset_settings,
    lineage,
    links,
    metrics_summary,
    run_name,
    storage_root,
    training_overrides,
    training_params,
    training_schedule,
)


def build_training_dag(name: str, settings: DagSettings) -> DAG:
    """Wire resolve_version -> train for dataset ``name``, scheduled on its Asset."""
    asset = dataset_asset(name)
    spec_training = dict(settings.training)  # the spec's TrainConfig overrides

    @dag(
        dag_id=f"train_{name}",
        schedule=training_schedule(name, settings),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params=training_params(),
        doc_md=__doc__,
        **dag_defaults(name, settings, "training", retries=1),
    )
    def training() -> None:
        @task(execution_timeout=timedelta(minutes=10))
        def resolve_version(params: Any = None, triggering_asset_events: Any = None,
                            run_id: str | None = None) -> dict:
            events = triggering_asset_events.get(asset, []) if triggering_asset_events else []
            version, version_uri = choice.choose_version(events, params["version"])
            from etl import logs, versions

            logs.configure(handler=False)
            announced = version_uri is not None  # by an event, not the Param
            if version_uri is None:
                version_uri = versions.resolve(storage_root(), name, version)
            manifest = versions.read_manifest(version_uri)  # raises on an incomplete version
            if announced:  # trains it, or skips saying why (already trained, a newer one)
                choice.settle(name, str(manifest.version), events, storage_root(),
                              run_name(run_id or "manual"))
            return {"version": manifest.version, "version_uri": version_uri}

        @task(queue=GPU_QUEUE, pool=GPU_POOL, execution_timeout=timedelta(hours=6))
        def train(resolved: dict, params: Any = None, run_id: str | None = None) -> dict:
            from etl import logs, storage

            logs.configure(handler=False)  # before TensorFlow's import: its INFO stays out
            logs.import_quietly("tensorflow")  # and absl's C++ INFO lines while it loads
            from training.config import RunOrigin, TrainConfig
            from training.run.train import train as train_model

            overrides = {**spec_training, **training_overrides(params)}
            folder = run_name(run_id or "manual")
            result = train_model(resolved["version_uri"], storage.join(storage_root(), "models"),
                                 folder, TrainConfig().with_overrides(**overrides),
                                 origin=RunOrigin(f"train_{name}", run_id) if run_id else None)
            links.remember(links.ModelPageLink,  # the task's "Model page" button
                           links.page_url(name, resolved["version"], folder))
            summary = metrics_summary(result["metrics"])
            lineage.for_model(get_current_context()["task"], resolved["version_uri"],
                              result["model_uri"], summary)
            return {"version": resolved["version"], "model_uri": result["model_uri"],
                    "metrics": summary,
                    "blessing": result["blessing"].to_dict(), "promoted": result["promoted"]}

        links.attach(train(resolve_version()), links.ModelPageLink())

    return training()


for _name, _settings in dataset_settings().items():
    globals()[f"train_{_name}"] = build_training_dag(_name, _settings)
