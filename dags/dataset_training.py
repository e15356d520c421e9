"""# Dataset training: every published version trained, or superseded by a trained newer one

One DAG per dataset spec, id `train_<name>`, scheduled on the dataset Asset (`dataset_<name>`)
that the ETL DAG's `publish` task updates, with a `PartitionedAssetTimetable`: each event is
keyed by its version id, so each publish gets its own run (`partition_key` = the version id),
even one published while the DAG is busy; the runs wait on the `gpu` pool. A run holding the GPU
reads the published versions and their states from storage (`training.ledger`), not from the
events that started it: it trains the newest version when no model of it exists, records the
older ones that waited as superseded by it, and looks again for a version published while it
trained. A run that finds the newest version trained skips, saying by which run.

| task | runs on | does | returns (XCom) |
| --- | --- | --- | --- |
| `resolve_version` | default queue | logs the versions the run's Asset events carried; a manual run with a `version` id checks that version's manifest | `{version, version_uri}` (None: the ledger decides) |
| `train` | `gpu` queue, `gpu` pool | tf.data pipeline over the shards, Keras model, writes model + metrics + verdict (with this DAG run's `dag_id`/`run_id`) under `models/<name>/<version>/<run>/`; a blessed model becomes `models/<name>/current.json` only if it is at least as good as the current one on the newest rows both can be judged on, and never when the current one was trained on newer data; its "Model page" button opens the model | `{version, model_uri, metrics, blessing, promoted, trained}` |
| `announce_model` | default queue | updates the `model_<name>` Asset when a model became current (scoring runs on it), keyed `<version>/<run folder>`; skipped otherwise | `{model_uri, version}` |

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
    ASSET_ACTIVE_RUNS,
    GPU_POOL,
    GPU_QUEUE,
    DagSettings,
    choice,
    dag_defaults,
    dataset_asset,
    dataset_settings,
    lineage,
    links,
    model_asset,
    model_key,
    run_name,
    storage_root,
    training_overrides,
    training_params,
    training_schedule,
)


def build_training_dag(name: str, settings: DagSettings) -> DAG:
    """Wire resolve_version -> train -> announce_model for ``name``, scheduled on its Asset."""
    asset = dataset_asset(name)
    spec_training = dict(settings.training)  # the spec's TrainConfig overrides

    @dag(
        dag_id=f"train_{name}",
        schedule=training_schedule(name),
        catchup=False,
        max_active_runs=ASSET_ACTIVE_RUNS,  # a run per publish; the `gpu` pool serialises
        dagrun_timeout=timedelta(hours=12),
        params=training_params(),
        doc_md=__doc__,
        **dag_defaults(name, settings, "training", retries=1),
    )
    def training() -> None:
        @task(execution_timeout=timedelta(minutes=10))
        def resolve_version(params: Any = None, triggering_asset_events: Any = None) -> dict:
            events = triggering_asset_events.get(asset, []) if triggering_asset_events else []
            choice.log_events(name, events, "trains")
            return choice.requested(name, choice.explicit_version(events, params["version"]),
                                    storage_root())

        @task(queue=GPU_QUEUE, pool=GPU_POOL, execution_timeout=timedelta(hours=6))
        def train(resolved: dict, params: Any = None, run_id: str | None = None) -> dict:
            from etl import logs

            logs.configure(handler=False)  # before TensorFlow's import: its INFO stays out
            from training.config import TrainConfig
            from training.record import Handover, RunOrigin
            from training.run.pending import PendingRun, nothing_to_train, train_pending

            overrides = {**spec_training, **training_overrides(params)}
            run = PendingRun(storage_root(), name, run_name(run_id or "manual"),
                             TrainConfig().with_overrides(**overrides),
                             RunOrigin(f"train_{name}", run_id) if run_id else None)
            if resolved["version"] is None and (why := nothing_to_train(run)):
                choice.skip(f"Not training {name}: {why}")  # before TensorFlow loads
            logs.import_quietly("tensorflow")  # and absl's C++ INFO lines while it loads
            runs = train_pending(run, version=resolved["version"])
            for trained in runs:
                lineage.for_model(get_current_context()["task"], trained.metrics.version_uri,
                                  trained.model_uri, trained.metrics.scalars())
            handover = Handover.of_runs(runs)  # the "Model page" button's run, then XCom
            links.remember(links.ModelPageLink, links.page_url(name, handover.version, run.run_folder))
            return handover.to_json()  # XCom holds plain JSON

        @task(outlets=[model_asset(name)], execution_timeout=timedelta(minutes=5))
        def announce_model(trained: dict) -> dict:  # its Asset event: scoring what waits
            announced = choice.announce(name, trained)  # skips when no model became current
            key = model_key(announced["version"], announced["model_uri"])
            get_current_context()["outlet_events"][model_asset(name)].add_partitions(key)
            return announced

        trained = train(resolve_version())
        links.attach(trained, links.ModelPageLink())
        announce_model(trained)

    return training()


for _name, _settings in dataset_settings().items():
    globals()[f"train_{_name}"] = build_training_dag(_name, _settings)
