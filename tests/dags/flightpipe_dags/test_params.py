"""The trigger forms as an operator meets them (issues 17, 28): labels, refusals, skipped publish.

Ranges, patterns and choices are JSON schema, refused when a run is created (tests/dags/test_dag_files.py;
through the real REST API and form in tests/integration/test_trigger_refusals.py), each as an ``allOf``
rule so a refusal prints that rule and its words, not the whole Param. What only code can
check fails the first task at once with one sentence (``ParamError``, Airflow's fail-now).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DAGS = REPO / "dags"
if "airflow" not in sys.modules:  # Airflow reads its home once, at first import.
    _HOME = Path(tempfile.mkdtemp(prefix="test-form-airflow-"))
    os.environ.update({
        "AIRFLOW_HOME": str(_HOME), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(_HOME / "plugins")})
if str(DAGS) not in sys.path:
    sys.path.append(str(DAGS))

import flightpipe_dags as fd

DAY = datetime(2013, 1, 3, tzinfo=UTC)


def _defaults(params: dict) -> dict:
    return {k: p.value for k, p in params.items()}


def test_no_choice_is_labelled_null() -> None:
    """The form labels each enum value through values_display; None would read "null"."""
    for params in (fd.etl_params(), fd.training_params()):
        for name, param in params.items():
            enum = param.schema.get("enum")
            if not enum:
                continue
            labels = param.schema.get("values_display") or {}
            for value in enum:
                if value is None or None in enum:
                    key = "null" if value is None else str(value)
                    assert key in labels and labels[key] != "null", (name, value)
    labels = fd.etl_params()["compression"].schema["values_display"]
    assert labels["null"].startswith("Spec default")


RULES = ("pattern", "minimum", "maximum", "exclusiveMaximum", "exclusiveMinimum")


def test_ranges_and_patterns_are_rules_that_say_what_they_allow() -> None:
    """Not at the top level, where the form's number field would clamp -5 to 1 unasked."""
    for params in (fd.etl_params(), fd.training_params()):
        for name, param in params.items():
            assert not set(RULES) & set(param.schema), name
            for rule in param.schema.get("allOf", []):
                assert set(RULES) & set(rule) and rule["description"], (name, rule)
    ruled = {n for ps in (fd.etl_params(), fd.training_params()) for n, p in ps.items()
             if "allOf" in p.schema}
    assert ruled == {"interval_end", "window_days", "source_uri", "shard_mb", "version",
                     "epochs", "batch_size", "min_margin"}


def test_a_refusal_names_the_param_and_prints_only_its_rule() -> None:
    """As the API server words it (its own Param classes, the DAG's schema)."""
    from airflow.exceptions import ParamValidationError
    from airflow.serialization.definitions.param import SerializedParam, SerializedParamsDict

    params = SerializedParamsDict({k: SerializedParam(p.value, p.description, **p.schema)
                                   for k, p in fd.etl_params().items()})
    with pytest.raises(ParamValidationError) as err:
        params.deep_merge({"shard_mb": -5}).validate()
    first, *rest = str(err.value).splitlines()
    assert first == "Invalid input for param shard_mb: -5 is less than the minimum of 1"
    assert "a whole number from 1 to 4096" in "\n".join(rest)
    assert "title" not in str(err.value) and "Shard size" not in str(err.value)


@pytest.mark.parametrize(("value", "allowed"), [
    ("2013-02-30", "real calendar date"), ("2014-02-29T00:00:00Z", "real calendar date"),
    ("2013-04-31 06:00", "real calendar date")])
def test_a_date_the_pattern_passes_fails_the_task_for_good(value: str, allowed: str,
                                                            caplog) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    params = {**_defaults(fd.etl_params()), "interval_end": value}
    fd.etl_params()["interval_end"].resolve(value)  # the schema lets it through
    with caplog.at_level(logging.ERROR), pytest.raises(AirflowFailException) as err:
        fd.resolve_etl_options(params, DAY, None, "file:///r")
    reason = err.value.reason
    assert reason.startswith("Param interval_end=") and allowed in reason, reason
    assert "\n" not in reason and len(reason) < 220, reason
    assert [r.getMessage() for r in caplog.records] == [reason]  # logged before the raise
    # Airflow logs the exception again: it points at that line instead of repeating it
    assert str(err.value) == "Param interval_end refused (the ERROR line above says what it allows)"


def test_a_source_that_leaves_the_root_through_a_link_fails_the_task(tmp_path: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    root, outside = tmp_path / "root", tmp_path / "elsewhere"
    (root / "raw").mkdir(parents=True)
    outside.mkdir()
    (root / "raw" / "escape").symlink_to(outside)
    source = "raw/escape/date={date}/flights.csv"
    fd.etl_params()["source_uri"].resolve(source)  # no pattern can see a link
    params = {**_defaults(fd.etl_params()), "source_uri": source}
    with pytest.raises(AirflowFailException, match=r"^Param source_uri refused") as err:
        fd.resolve_etl_options(params, DAY, None, root.as_uri())
    assert re.match(r"^Param source_uri=.* storage root", err.value.reason), err.value.reason
    inside = {**params, "source_uri": "raw/flights/date={date}/flights.csv"}
    assert fd.resolve_etl_options(inside, DAY, None, root.as_uri()).source_uri \
        == inside["source_uri"]


def test_training_overrides_pass_through() -> None:
    params = {**_defaults(fd.training_params()), "epochs": 2, "min_margin": 0.0}
    assert fd.training_overrides(params) == {"epochs": 2, "min_margin": 0.0}
    assert fd.training_overrides(_defaults(fd.training_params())) == {}


def test_publish_says_why_it_skipped(monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """A re-run of a published interval: the publish task itself says why nothing happened."""
    from airflow.sdk.exceptions import AirflowSkipException

    from etl import pipeline

    sys.path.insert(0, str(DAGS))
    import dataset_etl

    uri = "file:///r/datasets/flights/20130103T000000Z_all"
    monkeypatch.setattr(pipeline, "publish", lambda *a, **k: pipeline.PublishedVersion.of(
        version_uri=uri, version="20130103T000000Z_all", created=False))
    publish = dataset_etl.etl_flights.get_task("publish").python_callable
    with caplog.at_level(logging.WARNING), pytest.raises(AirflowSkipException) as skipped:
        result = publish("file:///w")
        next(iter(result)) if result is not None else None
    reason = str(skipped.value)
    assert "already exists" in reason and "force_republish" in reason and uri in reason
    assert reason in caplog.text
