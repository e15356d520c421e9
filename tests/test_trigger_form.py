"""The trigger forms as an operator meets them (issue 17): labels, refusals, skipped publish.

Airflow answers a JSON-schema refusal with a dump of the whole schema (regex included), so
the schema only shapes the form and the DAGs' first tasks refuse bad values in one sentence.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
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


def test_the_schema_holds_no_regex_or_range_to_dump() -> None:
    for params in (fd.etl_params(), fd.training_params()):
        for name, param in params.items():
            assert not {"pattern", "minimum", "maximum", "exclusiveMaximum"} & set(param.schema), name


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("interval_end", "yesterday", "ISO 8601"), ("interval_end", "2013-13-45 25:00", "ISO 8601"),
    ("interval_end", "2013-02-30", "date"), ("window_days", 0, "from 1 to 3660"),
    ("shard_mb", 0, "from 1 to 4096"), ("source_uri", "ftp://host/raw", "gs://"),
    ("source_uri", "/etc/passwd", "storage root"), ("source_uri", "raw/../../x", "'..'"),
    ("compression", "zip", "one of none, GZIP"), ("validation_mode", "x", "quarantine, strict"),
    ("force_republish", "yes", "true or false"),
])
def test_etl_refusals_are_one_sentence(key: str, value: object, allowed: str) -> None:
    params = {**_defaults(fd.etl_params()), key: value}
    with pytest.raises(fd.ParamError) as err:
        fd.resolve_etl_options(params, DAY, None)
    message = str(err.value)
    assert message.startswith(f"Param {key}=") and f"{key} must be" in message, message
    assert allowed in message and "\n" not in message and len(message) < 220, message
    assert "^" not in message and "(?!" not in message  # no regex shown to the operator


@pytest.mark.parametrize(("key", "value"), [("version", "v1"), ("epochs", 0),
                                            ("batch_size", -1), ("min_margin", 0.5),
                                            ("min_margin", -0.1)])
def test_training_refusals_are_one_sentence(key: str, value: object) -> None:
    with pytest.raises(fd.ParamError, match=rf"^Param {key}=.* {key} must be [^\n]+\.$"):
        fd.check_training_params({**_defaults(fd.training_params()), key: value})


def test_training_overrides_pass_through_checked() -> None:
    params = {**_defaults(fd.training_params()), "epochs": 2, "min_margin": 0.0}
    assert fd.check_training_params(params) == {"epochs": 2, "min_margin": 0.0}
    assert fd.check_training_params(_defaults(fd.training_params())) == {}


def test_publish_says_why_it_skipped(monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """A re-run of a published interval: the publish task itself says why nothing happened."""
    from airflow.sdk.exceptions import AirflowSkipException

    from etl import pipeline

    sys.path.insert(0, str(DAGS))
    import dataset_etl

    uri = "file:///r/datasets/flights/20130103T000000Z_all"
    monkeypatch.setattr(pipeline, "publish", lambda *a, **k: {
        "version_uri": uri, "version": "20130103T000000Z_all", "created": False})
    publish = dataset_etl.etl_flights.get_task("publish").python_callable
    with caplog.at_level(logging.WARNING), pytest.raises(AirflowSkipException) as skipped:
        result = publish("file:///w")
        next(iter(result)) if result is not None else None
    reason = str(skipped.value)
    assert "already exists" in reason and "force_republish" in reason and uri in reason
    assert reason in caplog.text
