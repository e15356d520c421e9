"""OpenLineage events of one ETL run and one training run through Airflow (issue 34, item 7).

The real DAG files run through ``dag.test()`` in a fresh Airflow home with the provider's
file transport (configured by ``AIRFLOW__OPENLINEAGE__TRANSPORT``, as a deployment would);
the test reads the events back and checks them against the OpenLineage spec's required
fields, our custom facet against its JSON schema, and the inputs, outputs and facets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from dagtest import airflow_env, prepare, run_script

REPO = Path(__file__).resolve().parent.parent
SCRIPT = r"""
import json, sys
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
folder, etl_conf, train_conf = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
etl = bag.dags["etl_flights"].test(logical_date=None, run_conf=etl_conf)
out = {"etl": {ti.task_id: ti.state for ti in etl.get_task_instances()}}
train = bag.dags["train_flights"].test(logical_date=None, run_conf=train_conf)
out["train"] = {ti.task_id: ti.state for ti in train.get_task_instances()}
print("E2E_RESULT=" + json.dumps(out, default=str))
"""
VERSION = "20130104T000000Z_20130101T000000Z"


def _complete(events: list[dict], task: str) -> dict:
    done = [e for e in events if e["eventType"] == "COMPLETE"
            and e["job"]["name"].endswith(f".{task}")]
    assert len(done) == 1, [(e["eventType"], e["job"]["name"]) for e in events]
    return done[0]


def _check_spec(event: dict) -> None:
    """The event against the OpenLineage spec as the official client generates it from the
    spec's JSON schemas (openlineage-python ships the classes, not the schema files): each
    object rebuilt with the client's classes, whose validators check eventTime, runId,
    producer and schema URLs; every facet's _producer/_schemaURL, and each known facet rebuilt
    from its payload under the schema URL its class names."""
    from openlineage.client import event_v2 as ol

    datasets = [ol.InputDataset(d["namespace"], d["name"]) for d in event.get("inputs", [])]
    outputs = [ol.OutputDataset(d["namespace"], d["name"]) for d in event.get("outputs", [])]
    rebuilt = ol.RunEvent(eventType=ol.RunState(event["eventType"]),
                          eventTime=event["eventTime"], run=ol.Run(runId=event["run"]["runId"]),
                          job=ol.Job(event["job"]["namespace"], event["job"]["name"]),
                          producer=event["producer"], inputs=datasets, outputs=outputs)
    assert event["schemaURL"] == rebuilt.schemaURL
    for ds in event.get("inputs", []) + event.get("outputs", []):
        for key, facet in {**ds.get("facets", {}), **ds.get("outputFacets", {})}.items():
            _check_facet(key, facet)
    for key, facet in event["run"].get("facets", {}).items():
        assert facet["_producer"] and facet["_schemaURL"].startswith("https://"), key


def _check_facet(key: str, facet: dict) -> None:
    from openlineage.client.facet_v2 import output_statistics_output_dataset as stats
    from openlineage.client.facet_v2 import schema_dataset

    known = {"schema": lambda f: schema_dataset.SchemaDatasetFacet(fields=[
                 schema_dataset.SchemaDatasetFacetFields(**x) for x in f["fields"]]),
             "outputStatistics": lambda f: stats.OutputStatisticsOutputDatasetFacet(
                 **{k: v for k, v in f.items() if not k.startswith("_")})}
    assert facet["_producer"].startswith("https://"), key
    if key in known:
        assert facet["_schemaURL"] == known[key](facet)._schemaURL, key


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_etl_and_training_runs_emit_lineage_with_inputs_outputs_and_facets(
        tmp_path: Path) -> None:
    env, root = airflow_env(tmp_path)
    log = tmp_path / "lineage.jsonl"
    env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(log), "append": True})
    env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "flightpipe-test"
    prepare(env, [sys.executable, "-m", "etl", "land", "--root", root, "--start-day",
                  "2013-01-01", "--end-day", "2013-01-04"])
    out = run_script(SCRIPT, env, {"interval_end": "2013-01-04T00:00:00+00:00",
                                   "window_days": 3, "shard_mb": 1},
                     {"epochs": 1, "batch_size": 256, "min_margin": 0.0, "version": VERSION},
                     timeout=540)
    assert out["etl"]["publish"] == "success" and out["train"]["train"] == "success", out
    _check_events(log, tmp_path / "data")


def _check_events(log: Path, data: Path) -> None:
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for event in events:
        _check_spec(event)
    publish = _complete(events, "publish")
    assert {(i["namespace"], i["name"]) for i in publish["inputs"]} >= {
        ("file", str(data / "raw/flights")), ("file", str(data / "raw/weather/weather.csv"))}
    (version,) = publish["outputs"]
    assert (version["namespace"], version["name"]) == (
        "file", str(data / "datasets/flights" / VERSION))
    fields = {f["name"] for f in version["facets"]["schema"]["fields"]}
    assert {"distance", "carrier", "temp", "late"} <= fields
    manifest = json.loads((data / "datasets/flights" / VERSION / "manifest.json").read_text())
    rows = sum(s["num_examples"] for s in manifest["splits"].values())
    assert version["outputFacets"]["outputStatistics"]["rowCount"] == rows > 2000
    facet = version["facets"]["flightpipe_version"]
    schema = json.loads((REPO / "docs/openlineage/FlightpipeVersionDatasetFacet.json")
                        .read_text())
    jsonschema.validate(facet, schema)
    assert facet["version"] == VERSION and facet["verdict"].startswith("passed")
    assert facet["_schemaURL"].endswith("FlightpipeVersionDatasetFacet.json")
    train = _complete(events, "train")
    assert [(i["namespace"], i["name"]) for i in train["inputs"]] == [
        ("file", version["name"])]
    (model,) = train["outputs"]
    assert model["name"].startswith(str(data / "models/flights" / VERSION))
    jsonschema.validate(model["facets"]["flightpipe_version"], schema)
    assert model["facets"]["flightpipe_version"]["metrics"]


def _lineage_module():
    sys.path.insert(0, str(REPO / "dags"))
    from flightpipe_dags import lineage

    return lineage


def test_names_follow_openlineage_naming_and_the_previous_version_is_an_input(
        tmp_path: Path) -> None:
    lineage = _lineage_module()
    assert lineage.dataset_id("gs://bucket/datasets/flights/v1") == ("gs://bucket",
                                                                     "datasets/flights/v1")
    assert lineage.dataset_id("file:///data/raw/flights/") == ("file", "/data/raw/flights")
    root = tmp_path.as_uri()
    assert lineage.raw_sources("flights", root)[:2] == [f"{root}/raw/flights",
                                                         f"{root}/raw/weather/weather.csv"]
    from etl.versions.manifest import Manifest

    manifest = Manifest.from_json({"dataset": "flights", "version": "v2", "schema": {
        "features": {"temp": {"dtype": "float32", "kind": "numeric"}},
        "label": {"name": "late", "dtype": "int64"}},
        "splits": {"train": {"num_examples": 8, "num_bytes": 80, "shards": [{"file": "f"}]}},
        "validation": {"success": True, "quarantined_rows": 2,
                       "drift": {"against": "v1", "drifted": ["temp"]}}}, "test")
    before = lineage.previous_version(manifest, root)
    assert before == f"{root}/datasets/flights/v1"
    out = lineage.operator_lineage(lineage.Lineage([before], [f"{root}/datasets/flights/v2"],
                                                   manifest))
    old = str(tmp_path / "datasets/flights/v1")
    assert [(d.namespace, d.name) for d in out.inputs] == [("file", old)]
    facet = out.outputs[0].facets["flightpipe_version"]
    assert (facet.verdict, facet.drifted, facet.splits) == ("passed_with_quarantine", ["temp"],
                                                            {"train": 8})
    assert [f.name for f in out.outputs[0].facets["schema"].fields] == ["temp", "late"]
    assert out.outputs[0].outputFacets["outputStatistics"].rowCount == 8


def test_lineage_that_cannot_be_gathered_is_logged_and_never_fails_the_task(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lineage = _lineage_module()

    class Task:
        pass

    task = Task()
    lineage.for_version(task, "flights", f"{tmp_path.as_uri()}/datasets/flights/gone",
                        tmp_path.as_uri())
    assert not hasattr(task, "get_openlineage_facets_on_complete")
    assert "OpenLineage: no lineage for" in caplog.text
