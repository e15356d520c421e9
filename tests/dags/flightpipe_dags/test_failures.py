"""Which failures fail at once and which keep Airflow's retries (``flightpipe_dags.failures``).

The classes are the real ones; the training ones (TensorFlow at import) are checked from the
source instead. A DAG run that fails once and one that is retried: tests/e2e/test_fail_once.py.
"""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO / "dags") not in sys.path:
    sys.path.append(str(REPO / "dags"))

from airflow.sdk import RetryAction
from airflow.sdk.exceptions import AirflowFailException, AirflowTaskTimeout
from flightpipe_dags.failures import (
    DETERMINISTIC,
    MAX_SHOWN,
    RETRY_POLICY,
    TRANSIENT,
    classify,
    retry_line,
    shown,
)
from flightpipe_dags.options import ParamError
from flightpipe_dags.wait import partition_end

from etl.errors import (
    ChecksumMismatchError,
    IncompleteVersionError,
    LeaseHeldError,
    LeaseLostError,
    MissingRawFileError,
    NoVersionError,
    PathOutsideRootError,
    PipelineError,
    SegmentGoneError,
    StorageError,
    ValidationFailed,
    VersionExistsError,
    VersionLockedError,
)
from etl.segments.plan import SourceFilesError
from etl.spec.model import SpecError
from etl.spec.scheduling import SpecNotFoundError, SpecSettingsError
from etl.validation.suite import SuiteError


def _raised(fn) -> BaseException:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error under test, whatever it is
        return exc
    raise AssertionError("expected an error")


def _read_error(message: str) -> BaseException:
    from etl.kinds.tabular.read import SourceReadError

    return SourceReadError(message)


DETERMINISTIC_CASES = {
    "validation failed": lambda: ValidationFailed("dataset 'wine': 1 expectation(s) failed"),
    "raw file unparseable": lambda: _read_error("raw/a.csv: row 3: expected 19 columns, got 4"),
    "raw file missing (read)": lambda: _read_error("raw/a.csv: source file not found"),
    "raw file missing (window)": lambda: SourceFilesError("source 'f': raw/a.csv does not exist"),
    "raw file missing (score)": lambda: MissingRawFileError("no such raw file: raw/a.csv"),
    "spec error": lambda: SpecError("spec.yaml: label: unknown column"),
    "suite error": lambda: SuiteError("expectations.json: not JSON"),
    "spec not found": lambda: SpecNotFoundError("no spec named 'x'"),
    "spec settings": lambda: SpecSettingsError("spec.yaml: schedule: not a cron"),
    "no manifest": lambda: IncompleteVersionError("v1: no manifest.json"),
    "no version": lambda: NoVersionError("flights: no published version"),
    "version exists": lambda: VersionExistsError("file:///d/v1"),
    "path outside root": lambda: PathOutsideRootError("'..' refused"),
    "checksum": lambda: ChecksumMismatchError("s-00000: expected 10 bytes, found 9"),
    "partition key": lambda: _raised(lambda: partition_end("us")),
    "refused Param": lambda: ParamError("interval_end", "2014-02-30", "a real date"),
    "AirflowFailException": lambda: AirflowFailException("deadline passed"),
}


def _comm_closed() -> BaseException:
    from distributed.comm.core import CommClosedError

    return CommClosedError("in <TCP (closed) ConnectionPool.gather>: Stream is closed")


def _killed_worker() -> BaseException:
    from distributed.scheduler import KilledWorker

    return KilledWorker("('read-abc', 0)", "tcp://127.0.0.1:4000", 3)


def _gcs_503() -> BaseException:
    from gcsfs.retry import HttpError

    return HttpError({"code": 503, "message": "Service Unavailable"})


TRANSIENT_CASES = {
    "storage retries spent": lambda: StorageError("read gs://b/x: gave up after 4 attempts"),
    "lease held": lambda: LeaseHeldError("gs://b/v/_WRITER", {"owner": "run-1"}),
    "lease lost": lambda: LeaseLostError("gs://b/v/_WRITER"),
    "version locked": lambda: VersionLockedError("gs://b/v", {"owner": "run-1"}),
    "segment gone": lambda: SegmentGoneError("1 segment(s) of the window vanished"),
    "OSError": lambda: OSError(5, "Input/output error"),
    "ConnectionError": lambda: ConnectionError("connection reset by peer"),
    "TimeoutError": lambda: TimeoutError("read timed out"),
    "FileNotFoundError from storage": lambda: FileNotFoundError("no such file: gs://b/x"),
    "gcsfs 503": _gcs_503,
    "dask CommClosedError": _comm_closed,
    "dask KilledWorker": _killed_worker,
    "a bug": lambda: KeyError("version_uri"),
    "execution timeout": lambda: AirflowTaskTimeout("Timeout, PID: 42"),
}


@pytest.mark.parametrize("make", DETERMINISTIC_CASES.values(), ids=DETERMINISTIC_CASES)
def test_what_a_rerun_meets_again_is_deterministic(make) -> None:
    assert classify(make()) == DETERMINISTIC


@pytest.mark.parametrize("make", TRANSIENT_CASES.values(), ids=TRANSIENT_CASES)
def test_storage_network_lost_workers_and_the_unknown_are_transient(make) -> None:
    assert classify(make()) == TRANSIENT


def test_a_store_error_behind_a_refusal_keeps_the_retries() -> None:
    """Dask re-raises a reader's error as a new one; a network error in the chain wins."""
    try:
        try:
            raise ConnectionError("connection reset by peer")
        except ConnectionError as exc:
            raise ValidationFailed("could not read the partials") from exc
    except ValidationFailed as err:
        assert classify(err) == TRANSIENT
    try:
        try:
            raise FileNotFoundError("raw/a.csv")
        except FileNotFoundError as exc:
            raise _read_error("raw/a.csv: source file not found") from exc
    except PipelineError as err:  # a missing file named by our own error: the data is absent
        assert classify(err) == DETERMINISTIC


def test_a_missing_raw_file_is_still_a_file_not_found_error() -> None:
    err = MissingRawFileError("no such raw file: raw/a.csv")
    assert isinstance(err, FileNotFoundError) and str(err) == "no such raw file: raw/a.csv"


def test_the_log_line_says_which_and_what_happens_next() -> None:
    bad = ValidationFailed("dataset 'wine': 1 expectation(s) failed (strict mode):\n"
                           "expect_column_values_to_not_be_null on column 'alcohol'")
    assert retry_line(bad, 1, 2) == (
        "deterministic: ValidationFailed: dataset 'wine': 1 expectation(s) failed (strict "
        "mode): expect_column_values_to_not_be_null on column 'alcohol'; not retried")
    down = ConnectionError("storage unreachable")
    assert retry_line(down, 1, 2) == ("transient: ConnectionError: storage unreachable; "
                                        "Airflow retries it (try 1 of 3)")
    assert retry_line(down, 2, 1) == ("transient: ConnectionError: storage unreachable; "
                                        "no retries left (try 2 of 2)")
    assert retry_line(down, 3, 2).endswith("no retries left (try 3 of 3)")


def test_the_error_is_shown_on_one_short_line() -> None:
    line = shown(ValidationFailed("first\n  second\n" + "x" * 1000))
    assert "\n" not in line and line.startswith("ValidationFailed: first second x")
    assert len(line) <= len("ValidationFailed: ") + MAX_SHOWN and line.endswith("...")
    assert shown(KeyError()) == "KeyError"


def test_the_policy_fails_at_once_or_leaves_airflow_its_retries(caplog) -> None:
    caplog.set_level(logging.INFO, logger="airflow.task")
    decision = RETRY_POLICY.evaluate(ValidationFailed("1 expectation(s) failed"), 1, 2)
    assert decision.action == RetryAction.FAIL and decision.reason is None
    decision = RETRY_POLICY.evaluate(ConnectionError("reset"), 1, 2)
    assert decision.action == RetryAction.DEFAULT and decision.retry_delay is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "deterministic: ValidationFailed: 1 expectation(s) failed; not retried"),
        ("WARNING", "transient: ConnectionError: reset; Airflow retries it (try 1 of 3)")]
    assert type(RETRY_POLICY).deserialize(RETRY_POLICY.serialize()).evaluate(
        ConnectionError("reset"), 1, 2).action == RetryAction.DEFAULT


# --- the family, read from the source (training's classes import TensorFlow) ---------------

def _classes() -> dict[str, tuple[list[str], bool | None, str]]:
    """Every class under etl/ and training/: its base names, own ``retryable``, file."""
    found: dict[str, tuple[list[str], bool | None, str]] = {}
    for path in sorted([*(REPO / "etl").rglob("*.py"), *(REPO / "training").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            own = None
            for stmt in node.body:
                targets = (stmt.targets if isinstance(stmt, ast.Assign) else
                           [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                if any(getattr(t, "id", None) == "retryable" for t in targets):
                    own = ast.literal_eval(stmt.value)
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            found[node.name] = (bases, own, str(path.relative_to(REPO)))
    return found


def _retryable(name: str, classes: dict) -> bool | None:
    """The class's ``retryable``, its own or its first base's that has one."""
    bases, own, _ = classes[name]
    if own is not None:
        return own
    for base in bases:
        if base in classes and (value := _retryable(base, classes)) is not None:
            return value
    return None


def test_the_pipeline_errors_that_keep_their_retries_are_the_listed_ones() -> None:
    """A new error class fails at once unless it says otherwise; saying so is a decision this
    list records (and docs/AIRFLOW.md, "Which failures retry")."""
    classes = _classes()

    def family(name: str) -> bool:
        return name == "PipelineError" or any(
            b in classes and family(b) for b in classes[name][0])

    members = {n for n in classes if family(n)}
    assert {"EvaluationSplitError", "NoBlessedModelError", "NoModelError", "ValidationFailed",
            "SourceReadError", "SourceFilesError", "SpecError", "IncompleteVersionError",
            "MissingRawFileError", "ModelNotBlessedError", "ImageSourceError"} <= members
    retried = {n for n in members if _retryable(n, classes)}
    assert retried == {"StorageError", "SegmentGoneError", "LeaseHeldError", "LeaseLostError",
                       "VersionLockedError"}, retried
    assert all(_retryable(n, classes) is False for n in members - retried)
