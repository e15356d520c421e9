"""Exception types shared by every stage, so callers can react by kind, not by message.

Each says with ``retryable`` whether running the same task again could end otherwise:
Airflow fails a task at once on a ``False`` one and keeps its retries for a ``True`` one
(``dags/flightpipe_dags/failures.py``, docs/AIRFLOW.md "Which failures retry").
"""

from __future__ import annotations

from typing import ClassVar


class PipelineError(Exception):
    """Base class: anything the pipeline raises on purpose derives from it.

    ``retryable`` is False by default: the pipeline refuses on purpose what a re-run meets
    again (rows that fail validation, a raw file missing or unparseable, a spec, a version
    without a manifest). A class whose cause may be gone by the next try (a store that was
    down, another run holding a lease) sets it True.
    """

    retryable: ClassVar[bool] = False


class StorageError(PipelineError):
    """A storage operation failed for good (retry budget spent or unsupported server)."""

    retryable = True  # the store may be back by the task's next try


class MissingRawFileError(PipelineError, FileNotFoundError):
    """A raw file the run was given is not in storage: the data is not there, a retry reads
    the same listing. Still a FileNotFoundError for callers that catch that."""


class SegmentGoneError(PipelineError):
    """A segment of the window was deleted during the run (gc, retain); a retry rebuilds it."""

    retryable = True


class PathOutsideRootError(PipelineError, ValueError):
    """A path part would escape the storage root (``..``, absolute part, symlink)."""


class NoVersionError(PipelineError, LookupError):
    """A dataset has no published (complete) version under the storage root."""


class IncompleteVersionError(PipelineError):
    """A version directory has no manifest.json, so readers must not trust it."""


class ChecksumMismatchError(PipelineError):
    """A stored file's size or sha256 differs from what its manifest promises."""


class VersionExistsError(PipelineError):
    """The version is already published; versions are immutable.

    Attributes:
        version_uri: URI of the published version.
    """

    def __init__(self, version_uri: str, message: str | None = None) -> None:
        super().__init__(message or f"version already published: {version_uri}")
        self.version_uri = version_uri


class LeaseHeldError(PipelineError):
    """A live holder (recent heartbeat, process alive) keeps the lease; it is not ours.

    Attributes:
        lease_uri: URI of the lease object.
        holder: The lease's JSON body (owner, host, pid, acquired_at, heartbeat_at), if readable.
    """

    retryable = True  # the holder finishes or dies; a retry finds its work or takes over

    def __init__(self, lease_uri: str, holder: dict | None = None) -> None:
        h = holder or {}
        super().__init__(f"{lease_uri} is held by {h.get('owner', '?')!r} since "
                         f"{h.get('acquired_at', '?')} (last heartbeat {h.get('heartbeat_at', '?')})")
        self.lease_uri = lease_uri
        self.holder = h


class LeaseLostError(LeaseHeldError):
    """Our lease expired and was broken or taken over: stop working, publish nothing."""


class VersionLockedError(PipelineError):
    """Another live writer holds the version's ``_WRITER`` lease.

    Attributes:
        version_uri: URI of the version being written.
        holder: The lease's JSON content (owner, acquired_at, heartbeat_at), if readable.
    """

    retryable = True  # a retry finds the version published, or the writer dead

    def __init__(self, version_uri: str, holder: dict | None = None) -> None:
        who = (holder or {}).get("owner", "?")
        since = (holder or {}).get("acquired_at", "?")
        beat = (holder or {}).get("heartbeat_at")
        super().__init__(f"version {version_uri} is being written by {who!r} since {since}"
                         + (f" (last heartbeat {beat})" if beat else ""))
        self.version_uri = version_uri
        self.holder = holder or {}


class ValidationFailed(PipelineError):
    """The data broke the suite; ``summary`` holds the per-expectation results and
    ``results_uri`` the folder they were written to (the UI's validation page reads it)."""

    def __init__(self, message: str, summary: dict | None = None,
                 results_uri: str | None = None) -> None:
        super().__init__(message)
        self.summary = summary or {}
        self.results_uri = results_uri
