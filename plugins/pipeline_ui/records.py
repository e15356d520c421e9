"""Value types, limits and name checks of the pipeline UI: no I/O, no etl imports.

Split from ``catalog`` so the web layer and tests can use them without touching storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from etl.versions import Manifest
from training.ledger import VersionState
from training.record import ModelRecord

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_ITEMS = 10_000
MAX_MODELS_PER_VERSION = 20
MAX_SERVED_BYTES = 32 * 1024 * 1024
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_CARD_BYTES = 512 * 1024
LISTING_TTL_S = 15.0
MANIFEST_CACHE_SIZE = 256
IO_THREADS = 8

# One path segment: no separators, no "..", no leading dot, nothing a shell or URL mangles.
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:+=@~,-]{0,254}$")
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MANIFEST_FILE = "manifest.json"
CARD_FILE = "model_card.md"
PLOTS_DIR = "plots"
VALIDATION_DIR = "validation"
RESULTS_FILE = "results.json"  # etl.validation.report.RESULTS_FILE: the UI imports no validation
UNPUBLISHED_SHOWN = 5  # unpublished versions listed on a dataset page


class NotFound(LookupError):
    """The dataset, version, model or file does not exist (or is not complete yet)."""


class InvalidName(ValueError):
    """A path parameter is not a plain, safe name (e.g. contains ``..`` or a slash)."""


class StorageUnavailable(RuntimeError):
    """Storage answered with something other than "not found" (network, permissions)."""


@dataclass(frozen=True)
class Limits:
    """Ceilings that keep every page a bounded amount of storage I/O."""

    default_page_size: int = DEFAULT_PAGE_SIZE
    max_page_size: int = MAX_PAGE_SIZE
    max_items: int = MAX_ITEMS
    max_models_per_version: int = MAX_MODELS_PER_VERSION
    max_served_bytes: int = MAX_SERVED_BYTES
    max_json_bytes: int = MAX_JSON_BYTES
    max_card_bytes: int = MAX_CARD_BYTES
    listing_ttl_s: float = LISTING_TTL_S
    manifest_cache_size: int = MANIFEST_CACHE_SIZE
    io_threads: int = IO_THREADS


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a capped listing; ``truncated`` says the listing hit ``max_items``."""

    items: list[T]
    page: int
    per_page: int
    total: int
    truncated: bool = False

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def paginate(items: list[T], page: int, per_page: int, truncated: bool = False) -> Page[T]:
    """One page of ``items``; a page past the last one is NotFound, not an empty page."""
    listing = Page(items[(page - 1) * per_page : page * per_page], page, per_page, len(items),
                   truncated)
    if page > listing.pages:
        raise NotFound(f"there is no page {page:,}: {listing.pages:,} page(s) of "
                       f"{per_page:,} for {len(items):,} item(s)")
    return listing


@dataclass(frozen=True)
class ModelRow:
    """A training run under ``models/<dataset>/<version>/<run>/``."""

    run: str
    metrics: ModelRecord | None  # None: no metrics.json yet (running or failed)


@dataclass(frozen=True)
class VersionRow:
    """A complete version, its manifest and the models trained on it (bounded)."""

    version: str
    manifest: Manifest
    models: list[ModelRow] = field(default_factory=list)
    models_total: int = 0
    states: tuple[VersionState, ...] = ()  # its training and scoring states (training.ledger)


@dataclass(frozen=True)
class DatasetRow:
    name: str
    versions: int
    latest: str | None = None
    manifest: Manifest | None = None  # the newest version's (its drift, for the list)


@dataclass(frozen=True)
class ModelDetail:
    run: str
    metrics: ModelRecord | None
    card: str | None
    plots: list[str]
    files: list[str]


def basename(entry: Any) -> str:
    """list_dir may give names, URIs or fsspec info dicts; the UI needs the last segment."""
    if isinstance(entry, dict):
        entry = entry.get("name", "")
    return str(entry).rstrip("/").rsplit("/", 1)[-1]


def is_safe_name(value: str) -> bool:
    """One plain path segment: no separators, no ``..``, no leading dot."""
    return bool(_SEGMENT.match(value or "")) and ".." not in value


def is_image(name: str) -> bool:
    return any(name.lower().endswith(s) for s in IMAGE_SUFFIXES)


def check_name(value: str, what: str) -> str:
    """Return ``value`` if it is one safe path segment, else raise InvalidName naming it."""
    if not is_safe_name(value):
        raise InvalidName(f"{what} {value!r} is not a plain name (letters, digits, ._:+=@~,-)")
    return value


def check_relpath(value: str, what: str, max_depth: int = 16) -> list[str]:
    """Split a relative path into checked segments; refuses ``..``, ``//`` and absolute paths."""
    parts = (value or "").split("/")
    if len(parts) > max_depth:
        raise InvalidName(f"{what} {value!r} is nested deeper than {max_depth} levels")
    return [check_name(p, what) for p in parts]


DEFAULT_LIMITS = Limits()
