"""# Dataset scoring: the current model's predictions for each published window

One DAG per tabular dataset spec, id `score_<name>`, scheduled on the dataset Asset
(`dataset_<name>`) that the ETL DAG's `publish` task updates, like `train_<name>`, and
triggered by hand for a version or for raw files with no label yet.

| task | runs on | does | returns (XCom) |
| --- | --- | --- | --- |
| `score` | `gpu` queue, `gpu` pool | the newest version the triggering Asset events carry, else the `version` Param (or the `raw` Param's files, read and checked by the spec, the rows that fail quarantined): the current blessed model's SavedModel scores every row through tf.data and its serving signature; the predictions are published under `predictions/<name>/<window>/<model>/` manifest-last (a second run of the same window and model reports the published one); its "Predictions page" button opens them | `{uri, window, model, rows, scored, quarantined, psi, drifted}` |

A dataset with no blessed model yet: a run an ETL publish started skips, saying so (its
first versions publish while the first training runs); a run triggered by hand fails saying so. The run's OpenLineage event has
the version and the model in, the predictions out.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, get_current_context, task
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
    run_name,
    storage_root,
    training_schedule,
)


def build_scoring_dag(name: str, settings: DagSettings) -> DAG:
    """The one task of dataset ``name``'s scoring, scheduled on its Asset."""
    asset = dataset_asset(name)

    @dag(
        dag_id=f"score_{name}",
        schedule=training_schedule(name, settings),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=6),
        params={
            "version": Param("latest", type="string", title="Version",
                             description="A version id, or latest; ignored when an ETL "
                                         "publish triggered the run or raw files are given"),
            "raw": Param([], type="array", items={"type": "string"}, title="Raw files",
                         description="URIs of raw files of the spec's primary source to score "
                                     "instead (the label may be absent)"),
        },
        doc_md=__doc__,
        **dag_defaults(name, settings, "scoring", retries=1),
    )
    def scoring() -> None:
        @task(queue=GPU_QUEUE, pool=GPU_POOL, execution_timeout=timedelta(hours=4))
        def score(params: Any = None, triggering_asset_events: Any = None,
                  run_id: str | None = None) -> dict:
            from etl import logs

            logs.configure(handler=False)  # before TensorFlow's import: its INFO stays out
            logs.import_quietly("tensorflow")
            from training.score.model import NoBlessedModelError
            from training.score.run import ScoreOptions
            from training.score.run import score as run_score

            events = triggering_asset_events.get(asset, []) if triggering_asset_events else []
            version, version_uri = choice.choose_version(events, params["version"])
            raw = tuple(params.get("raw") or ()) if not events else ()
            if version_uri is not None:
                version = version_uri.rstrip("/").rsplit("/", 1)[-1]
            try:
                done = run_score(ScoreOptions(root=storage_root(), dataset=name,
                                              version=version, raw=raw,
                                              run_id=run_id or run_name("manual")))
            except NoBlessedModelError as err:  # by hand: fails; after a publish: skips
                choice.skip_unscored(name, version, err, events)
            m = done.manifest
            window, model = done.uri.rstrip("/").rsplit("/", 2)[-2:]
            links.remember(links.PredictionsPageLink, links.predictions_url(name, window, model))
            source = m.get("source") or {}
            lineage.for_predictions(get_current_context()["task"], source.get("version_uri"),
                                    m["model"]["model_uri"], done.uri)
            dist = m.get("distribution") or {}
            return {"uri": done.uri, "window": window, "model": model, "rows": m.get("rows"),
                    "scored": m.get("scored"), "quarantined": m.get("quarantined"),
                    "psi": dist.get("psi"), "drifted": dist.get("drifted"),
                    "created": done.created}

        links.attach(score(), links.PredictionsPageLink())

    return scoring()


for _name, _settings in dataset_settings().items():
    if _settings.kind == "tabular":
        globals()[f"score_{_name}"] = build_scoring_dag(_name, _settings)
