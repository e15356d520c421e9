"""# Dataset scoring: the current model's predictions for every published window

One DAG per tabular dataset spec, id `score_<name>`, scheduled on the dataset Asset
(`dataset_<name>`) that the ETL DAG's `publish` task updates and on `model_<name>`, which a
training run updates when it makes a new model current, with a `PartitionedAssetTimetable`
whose condition either Asset's keyed event satisfies: a run per publish (`partition_key` = the
version id) and per promotion (`<version>/<run folder>`); also triggered by hand for a version
or for raw files with no label yet.

| task | runs on | does | returns (XCom) |
| --- | --- | --- | --- |
| `score` | `gpu` queue, `gpu` pool | every published version not scored yet, read from storage whatever events started the run (`training.ledger`), except one whose rows a newer version's window holds (recorded as superseded by it); or, by hand, the `version` Param's version, or the `raw` Param's files (read and checked by the spec, the rows that fail quarantined): the current blessed model's SavedModel scores every row; the predictions are published under `predictions/<name>/<window>/<model>/` manifest-last; its "Predictions page" button opens the last | `{uri, window, model, rows, scored, quarantined, psi, drifted, windows}` |

Nothing waiting: the run skips saying each version's state. No blessed model yet: a run an
Asset event started skips, saying the versions wait for one (the promotion's event scores
them); a run triggered by hand fails saying so. The run's OpenLineage event has the version
and the model in, the predictions out.
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
    dataset_settings,
    lineage,
    links,
    run_name,
    scored_summary,
    scoring_params,
    scoring_schedule,
    storage_root,
)


def build_scoring_dag(name: str, settings: DagSettings) -> DAG:
    """The one task of dataset ``name``'s scoring, scheduled on its Assets."""

    @dag(
        dag_id=f"score_{name}",
        schedule=scoring_schedule(name),
        catchup=False,
        max_active_runs=ASSET_ACTIVE_RUNS,  # a run per event; the `gpu` pool serialises them
        dagrun_timeout=timedelta(hours=6),
        params=scoring_params(),
        doc_md=__doc__,
        **dag_defaults(name, settings, "scoring", retries=1),
    )
    def scoring() -> None:
        @task(queue=GPU_QUEUE, pool=GPU_POOL, execution_timeout=timedelta(hours=4))
        def score(params: Any = None, triggering_asset_events: Any = None,
                  run_id: str | None = None) -> dict:
            from etl import logs

            logs.configure(handler=False)  # before TensorFlow's import: its INFO stays out
            events = [e for evs in (triggering_asset_events or {}).values() for e in evs]
            choice.log_events(name, events, "scores")
            raw = () if events else tuple(params.get("raw") or ())
            version = choice.explicit_version(events, params["version"])
            asked = bool(raw) or version is not None
            from training.score.pending import nothing_to_score

            if not asked and (why := nothing_to_score(storage_root(), name)):
                choice.skip(f"Not scoring {name}: {why}")  # before TensorFlow loads
            logs.import_quietly("tensorflow")
            from training.score.model import NoBlessedModelError
            from training.score.pending import score_asked
            from training.score.run import ScoreOptions

            options = ScoreOptions(root=storage_root(), dataset=name, version=version or "latest",
                                   raw=raw, run_id=run_id or run_name("manual"))
            try:
                done = score_asked(options, asked)
            except NoBlessedModelError as err:
                if asked:
                    raise  # asked for by hand: the operator needs to know it failed
                choice.skip(f"Not scoring {name}: {err}. The versions published so far wait; "
                            f"the run a promoted model of train_{name} starts scores them.")
            for one in done:
                lineage.for_predictions(get_current_context()["task"], one.record.source_uri,
                                        one.record.model_uri, one.uri)
            links.remember(links.PredictionsPageLink, links.predictions_url(name, *done[-1].key))
            return scored_summary(done)

        links.attach(score(), links.PredictionsPageLink())

    return scoring()


for _name, _settings in dataset_settings().items():
    if _settings.kind == "tabular":
        globals()[f"score_{_name}"] = build_scoring_dag(_name, _settings)
