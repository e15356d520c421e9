"""# Dataset ETL: raw zone -> validated, versioned TFRecord shards

One DAG per dataset spec (`<folder>/<name>/spec.yaml` on `PIPELINE_SPECS_PATH`, by default
`etl/examples`), id `etl_<name>`. The spec may set `schedule`, `start_date`, `catchup`, `owner`
and `tags`; `PIPELINE_ETL_SCHEDULE` overrides every spec's schedule.

Each run publishes the version for its data interval: the window of raw data that ends at
the **data interval end** (by default nightly, daily intervals aligned on 00:00 UTC), by default
everything landed up to that point (`window_days` narrows it). The version id is derived
from the interval, never from the wall clock, so a retry or re-run targets the same version.

| task | does | returns (XCom) |
| --- | --- | --- |
| `wait_for_data` | first refuses what the Params' schema cannot (a calendar date, a source outside the storage root) at once, without retries; then waits, deferred (no worker, no pool slot), until every partition of the window has landed; past the spec's `arrival.wait` (default 6h) it fails once, naming what is missing | nothing |
| `build` | plans the window, builds the segments no earlier run built (read, validate every row, encode, write; small ones merged), judges the window and writes the version's draft | version URI |
| `publish` | writes `manifest.json` last, emits the dataset Asset event `{version_uri, version, version_page, verdict, ...}` keyed by the version id (`partition_key`); its "Version page" button opens the version in the Datasets view | version dict |

Every dataset kind runs these tasks. A segment holds a run of consecutive raw partitions
(days) sized by bytes, built once and shared by every later version, so a nightly run costs
its new day, not the whole history.

Heavy tasks share the `dask` pool so concurrent runs do not oversubscribe a worker.
`publish` does not depend on the previous run's: a refused or failed night never holds later
ones, and a run waiting for late data (deferred, no worker held) does not hold a run of another
window: up to `ETL_ACTIVE_RUNS` (8) runs are active at once, one at a time only for
`schedule: partitioned`, whose announced order is the publish order. While it waits, the
dataset page says beside the run what it waits for and until when. Order is kept where it
matters by storage, not by the scheduler: each version has its own writer lease and manifest
(created only if absent), `LATEST` only moves to a newer version (`etl.versions.version_key`),
and a training run skips a version when a newer one was published after its events (the
later run trains that). A re-run whose version already exists
skips `publish` (no Asset event, no retraining) unless `force_republish` is set.

Manual runs: the trigger form's Params override the interval end, window, raw zone URI, shard
size, compression and validation mode. Airflow checks each against its JSON schema (ranges,
patterns, choices) when the run is created, in the form and the REST API alike, and creates
no run for a bad value. What a schema cannot say (a calendar date such as Feb 30, a source
path that leaves the storage root through a link) fails `wait_for_data` at once, without retries,
with one line naming the Param and what it allows. A run whose version already exists is green with `publish` **skipped**; its log says
why in one line.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Metadata, dag, get_current_context, task
from flightpipe_dags import (
    DASK_POOL,
    DagSettings,
    dag_defaults,
    dataset_asset,
    dataset_settings,
    etl_active_runs,
    etl_params,
    etl_timetable,
    lineage,
    links,
    publish_key,
    skip_already_published,
    storage_root,
)
from flightpipe_dags.wait import WaitForData, run_options


def build_etl_dag(name: str, settings: DagSettings) -> DAG:
    """Wire dataset ``name``'s chain: wait_for_data -> build -> publish."""
    asset = dataset_asset(name)
    timetable = etl_timetable(settings.schedule, name)

    @dag(
        dag_id=f"etl_{name}",
        schedule=timetable,
        catchup=settings.catchup,
        max_active_runs=etl_active_runs(timetable),
        dagrun_timeout=timedelta(hours=8),
        params=etl_params(),
        doc_md=__doc__,
        **dag_defaults(name, settings, "etl"),
    )
    def etl() -> None:
        @task(pool=DASK_POOL, execution_timeout=timedelta(hours=4))
        def build(params: Any = None, data_interval_end: Any = None, dag_run: Any = None,
                  run_id: str | None = None) -> str:
            opts = run_options(params, data_interval_end, dag_run)
            from etl import logs, pipeline

            logs.configure(handler=False)  # libraries at WARNING: the log says what ran
            with links.failed_validation(name):  # its results' page, in the log and a button
                return pipeline.build_version(name, storage_root(), opts.interval_end,
                                              opts.interval_start, run_id, opts.run_options())

        @task(outlets=[asset], execution_timeout=timedelta(minutes=20))
        def publish(written_uri: str):
            from etl import logs, pipeline, versions

            logs.configure(handler=False)
            result = pipeline.publish(written_uri)
            page = links.page_url(name, str(result.version))
            links.remember(links.VersionPageLink, page)  # the task's "Version page" button
            logging.getLogger("airflow.task").info("Version page: %s", page)
            if not result.created:
                skip_already_published(name, result)
            manifest = versions.read_manifest(result.version_uri)
            links.warn_drift(name, manifest, page)
            context = get_current_context()
            lineage.for_version(context["task"], name, result.version_uri, storage_root())
            # one key per publish: its own run of each consumer, no event left unlinked
            context["outlet_events"][asset].add_partitions(publish_key(str(result.version)))
            yield Metadata(asset, extra=links.event_extra(result, manifest, page))
            return result.to_json()  # XCom holds JSON: Published.from_json reads it back

        waited = WaitForData(task_id="wait_for_data", dataset=name,
                             wait=settings.arrival_wait,
                             poke_s=settings.arrival_every.total_seconds(),
                             execution_timeout=timedelta(minutes=10))
        built = links.attach(build(), links.ValidationPageLink())
        waited >> built
        links.attach(publish(built), links.VersionPageLink())

    return etl()


for _name, _settings in dataset_settings().items():
    globals()[f"etl_{_name}"] = build_etl_dag(_name, _settings)
