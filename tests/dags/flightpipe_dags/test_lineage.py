"""OpenLineage events of one ETL run, one training run and one score run through Airflow
(issue 34, item 7; issue 41).

The real DAG files run through ``dag.test()`` in a fresh Airflow home with the provider's
file transport (configured by ``AIRFLOW__OPENLINEAGE__TRANSPORT``, as a deployment would);
the test reads the events back and validates each against the OpenLineage spec's own JSON
schemas (``openlineage_spec/``), every facet against the schema its ``_schemaURL`` names, then
checks the inputs, outputs and facets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.support.dagtest import airflow_env, prepare, run_script

REPO = Path(__file__).resolve().parents[3]
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
score = bag.dags["score_flights"].test(logical_date=None, run_conf={"version": "latest"})
out["score"] = {ti.task_id: ti.state for ti in score.get_task_instances()}
print("E2E_RESULT=" + json.dumps(out, default=str))
"""
VERSION = "20130104T000000Z_20130101T000000Z"


def _complete(events: list[dict], task: str) -> dict:
    done = [e for e in events if e["eventType"] == "COMPLETE"
            and e["job"]["name"].endswith(f".{task}")]
    assert len(done) == 1, [(e["eventType"], e["job"]["name"]) for e in events]
    return done[0]


SPEC = REPO / "tests/support/openlineage_spec"  # the spec's own schemas (docs/AIRFLOW.md)


def _registry(events: list[dict]) -> Registry:
    """Every schema an event may name, by its ``$id``: the spec's event and standard facets
    (vendored, see openlineage_spec/README.md), ours (docs/openlineage/), and the Airflow
    provider's facets (shipped in the provider package without an ``$id``, so registered under
    the schema URLs the events give them)."""
    docs = [json.loads(p.read_text()) for p in sorted(SPEC.rglob("*.json"))]
    docs += [json.loads(p.read_text()) for p in (REPO / "docs/openlineage").glob("*.json")]
    resources = [(d["$id"], Resource.from_contents(d)) for d in docs]
    import airflow.providers.openlineage as provider

    shipped = {p.name: p for p in (Path(provider.__file__).parent / "facets").glob("*.json")}
    for url in {_schema_file(f["_schemaURL"]) for f in _facets(events)}:
        name = url.rsplit("/", 1)[-1]
        if "openlineage.io" not in url and name in shipped:
            resources.append((url, Resource.from_contents(
                json.loads(shipped[name].read_text()), default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


def _schema_file(url: str) -> str:
    return url.split("#", 1)[0]


def _facets(events: list[dict]) -> list[dict]:
    found = []
    for event in events:
        found += event["run"].get("facets", {}).values()
        found += event["job"].get("facets", {}).values()
        for ds in event.get("inputs", []) + event.get("outputs", []):
            for group in ("facets", "inputFacets", "outputFacets"):
                found += ds.get(group, {}).values()
    return found


def _check_spec(events: list[dict]) -> None:
    """Each event against the spec's ``RunEvent`` schema (required fields, UUID run id, times,
    base facet shape), and each facet against the schema its ``_schemaURL`` names."""
    registry = _registry(events)

    def validate(instance: dict, url: str, what: str) -> None:
        if _schema_file(url) not in registry:
            pytest.fail(f"{what}: no schema for {url} among the spec's, the provider's or ours")
        errors = list(Draft202012Validator({"$ref": url}, registry=registry,
                                           format_checker=FormatChecker())
                      .iter_errors(instance))
        assert not errors, f"{what} against {url}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])

    for event in events:
        assert event["schemaURL"].endswith("OpenLineage.json#/$defs/RunEvent"), event["schemaURL"]
        validate(event, event["schemaURL"], f"{event['eventType']} {event['job']['name']}")
        for facet in _facets([event]):
            validate(facet, facet["_schemaURL"], f"a facet of {event['job']['name']}")


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_etl_training_and_score_runs_emit_lineage_with_inputs_outputs_and_facets(
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
    assert out["score"]["score"] == "success", out
    _check_events(log, tmp_path / "data")


def _check_events(log: Path, data: Path) -> None:
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    _check_spec(events)
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
    score = _complete(events, "score")  # the version and the model in, the predictions out
    assert [(i["namespace"], i["name"]) for i in score["inputs"]] == [
        ("file", version["name"]), ("file", model["name"])]
    (predictions,) = score["outputs"]
    assert predictions["name"] == str(data / "predictions/flights" / VERSION /
                                      f"{VERSION}--{model['name'].rsplit('/', 1)[-1]}")
    assert (Path(predictions["name"]) / "manifest.json").is_file()


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


def test_the_spec_check_refuses_what_the_spec_refuses() -> None:
    """The schema check is not vacuous: a well-formed event passes, each planted defect fails."""
    url = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
    schema_facet = {"_producer": "https://example.org/p",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/"
                                  "SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                    "fields": [{"name": "temp", "type": "float32"}]}
    good = {"eventType": "COMPLETE", "eventTime": "2026-11-25T10:00:00.000000+00:00",
            "producer": "https://example.org/p", "schemaURL": url,
            "run": {"runId": "01890f3e-8f5e-7d3a-9a3b-3f2b1c0d4e5f", "facets": {}},
            "job": {"namespace": "ns", "name": "etl_flights.publish", "facets": {}},
            "inputs": [], "outputs": [{"namespace": "file", "name": "/d/v1",
                                       "facets": {"schema": schema_facet}}]}
    _check_spec([good])
    bad_facet = {**schema_facet, "fields": [{"type": "float32"}]}  # a field needs its name
    for bad in ({**good, "run": {"runId": "run-1"}},
                {k: v for k, v in good.items() if k != "producer"},
                {**good, "outputs": [{"namespace": "file", "name": "/d/v1",
                                      "facets": {"schema": bad_facet}}]}):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            _check_spec([bad])


def test_without_a_drift_report_the_previous_version_is_the_one_before_in_the_one_order(
        tmp_path: Path) -> None:
    """The 7-day window ending with the full version is after it (``version_key``), so the
    full version is its previous one; the ids' string order would skip it."""
    from datetime import UTC, datetime

    from etl.versions.manifest import Manifest
    from tests.support.ui_fixtures import write_version

    lineage, root = _lineage_module(), tmp_path.as_uri()
    end = datetime(2014, 1, 1, tzinfo=UTC)
    older = write_version(tmp_path, "flights", datetime(2013, 12, 31, tzinfo=UTC))
    demo = write_version(tmp_path, "flights", end)
    window = write_version(tmp_path, "flights", end, datetime(2013, 12, 25, tzinfo=UTC))

    def previous(version: str) -> str | None:
        return lineage.previous_version(Manifest.from_json(
            {"dataset": "flights", "version": version}, "test"), root)

    assert previous(window) == f"{root}/datasets/flights/{demo}"
    assert previous(demo) == f"{root}/datasets/flights/{older}"
    assert previous(older) is None


def test_a_score_runs_lineage_has_the_version_and_model_in_and_the_predictions_out(
        tmp_path: Path) -> None:
    lineage = _lineage_module()
    root = tmp_path.as_uri()
    version, model = f"{root}/datasets/flights/v2", f"{root}/models/flights/v1/run-1"
    predictions = f"{root}/predictions/flights/v2/v1--run-1"

    class Task:
        pass

    task = Task()
    lineage.for_predictions(task, version, model, predictions)
    out = task.get_openlineage_facets_on_complete(None)
    assert [d.name for d in out.inputs] == [str(tmp_path / "datasets/flights/v2"),
                                            str(tmp_path / "models/flights/v1/run-1")]
    assert [d.name for d in out.outputs] == [str(tmp_path / "predictions/flights/v2/v1--run-1")]
    raw = Task()  # raw files scored: the model is the only input
    lineage.for_predictions(raw, None, model, predictions)
    assert [d.name for d in raw.get_openlineage_facets_on_complete(None).inputs] == [
        str(tmp_path / "models/flights/v1/run-1")]
