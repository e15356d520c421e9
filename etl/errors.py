"""Exception types shared by every stage, so callers can react by kind, not by message."""

from __future__ import annotations


class PipelineError(Exception):
    """Base class: anything the pipeline raises on purpose derives from it."""


class StorageError(PipelineError):
    """A storage operation failed for good (retry budget spent or unsupported server)."""


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


class VersionLockedError(PipelineError):
    """Another live writer holds the version's ``_WRITER`` lock.

    Attributes:
        version_uri: URI of the version being written.
        holder: The lock's JSON content (owner, acquired_at), if readable.
    """

    def __init__(self, version_uri: str, holder: dict | None = None) -> None:
        who = (holder or {}).get("owner", "?")
        since = (holder or {}).get("acquired_at", "?")
        super().__init__(f"version {version_uri} is being written by {who!r} since {since}")
        self.version_uri = version_uri
        self.holder = holder or {}


class ValidationFailed(PipelineError):
    """The data broke the suite; ``summary`` holds the per-expectation results."""

    def __init__(self, message: str, summary: dict | None = None) -> None:
        super().__init__(message)
        self.summary = summary or {}
