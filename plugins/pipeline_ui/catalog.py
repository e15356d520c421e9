"""Read-only, bounded view of what the pipeline published: datasets, versions, models.

Every read goes through ``etl.storage`` / ``etl.versions`` so one code path serves
``file://`` and ``gs://`` roots. Listings are capped at ``Limits.max_items`` and paginated,
served files are size-capped, and manifests (immutable once written) are cached, so a
browser paging through a bucket costs a bounded number of object reads.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from etl import storage, versions
from etl.errors import IncompleteVersionError, PathOutsideRootError
from etl.versions import Manifest
from etl.versions.ids import is_version_id
from training import ledger
from training.judge.current import CURRENT_FILE, Current
from training.ledger import VersionState
from training.predictions import PREDICTIONS_DIR
from training.record import METRICS_FILE, ModelRecord

from .records import (
    CARD_FILE,
    DEFAULT_LIMITS,
    MANIFEST_FILE,
    PLOTS_DIR,
    RESULTS_FILE,
    UNPUBLISHED_SHOWN,
    VALIDATION_DIR,
    DatasetRow,
    InvalidName,
    Limits,
    ModelDetail,
    ModelRow,
    NotFound,
    Page,
    StorageUnavailable,
    VersionRow,
    basename,
    check_name,
    check_relpath,
    is_image,
    is_safe_name,
    paginate,
)

__all__ = ["Catalog", "InvalidName", "Limits", "NotFound", "Page", "StorageUnavailable",
           "check_name", "check_relpath"]
T = TypeVar("T")


class Catalog:
    """Read-only access to one storage root, shared by all requests of the UI app."""

    def __init__(self, root: str, limits: Limits = DEFAULT_LIMITS) -> None:
        self.root = root.rstrip("/")
        self.limits = limits
        self._lock = threading.Lock()
        self._manifests: OrderedDict[str, tuple[Manifest, float]] = OrderedDict()
        self._listings: dict[tuple[str, ...], tuple[float, Any]] = {}
        self._pool = ThreadPoolExecutor(limits.io_threads, thread_name_prefix="pipeline-ui")

    # ---- low-level, guarded reads -------------------------------------------------------
    def _guard(self, fn: Callable[[], T], what: str) -> T:
        """Map storage errors to NotFound / StorageUnavailable with the object named."""
        try:
            return fn()
        except (NotFound, InvalidName, StorageUnavailable):
            raise
        except FileNotFoundError as exc:
            raise NotFound(f"{what} does not exist") from exc
        except IncompleteVersionError as exc:
            raise NotFound(f"{what} is not complete (no manifest.json)") from exc
        except PathOutsideRootError as exc:
            raise InvalidName(str(exc)) from exc
        except Exception as exc:
            raise StorageUnavailable(f"reading {what} failed: {type(exc).__name__}: {exc}") from exc

    def _cached_listing(self, key: tuple[str, ...], fn: Callable[[], Any]) -> Any:
        """Listings change only when something is published: a short TTL spares the store."""
        now = time.monotonic()
        with self._lock:
            hit = self._listings.get(key)
            if hit and hit[0] > now:
                return hit[1]
        value = fn()
        with self._lock:
            if len(self._listings) > 4 * self.limits.manifest_cache_size:
                self._listings.clear()
            self._listings[key] = (now + self.limits.listing_ttl_s, value)
        return value

    def _children(self, uri: str, what: str) -> tuple[list[str], bool]:
        """Sorted child names of a folder (capped); a missing folder raises NotFound."""

        def list_() -> tuple[list[str], bool]:
            if not storage.exists(uri):
                raise NotFound(f"{what} does not exist")
            names = sorted({basename(e) for e in storage.list_dir(uri)} - {""})
            return names[: self.limits.max_items], len(names) > self.limits.max_items

        return self._cached_listing(("ls", uri), lambda: self._guard(list_, what))

    def _read_capped(self, uri: str, cap: int, what: str) -> bytes:
        """Read at most ``cap`` bytes; a larger object is refused rather than streamed whole."""

        def read() -> bytes:
            fs, path = storage.get_fs(uri)
            with fs.open(path, "rb") as fh:
                data = fh.read(cap + 1)
            if len(data) > cap:
                raise StorageUnavailable(f"{what} is larger than the {cap:,}-byte limit")
            return data

        return self._guard(read, what)

    def _read_json(self, uri: str, what: str) -> dict[str, Any]:
        data = self._read_capped(uri, self.limits.max_json_bytes, what)
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise StorageUnavailable(f"{what} is not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise StorageUnavailable(f"{what} holds {type(value).__name__}, expected an object")
        return value

    def clamp(self, per_page: int | None) -> int:
        """Page size within [1, max_page_size], default when not given."""
        size = per_page or self.limits.default_page_size
        return max(1, min(size, self.limits.max_page_size))

    # ---- URIs ---------------------------------------------------------------------------
    def dataset_uri(self, dataset: str) -> str:
        return self._guard(lambda: storage.safe_join(
            self.root, "datasets", check_name(dataset, "dataset")), "dataset path")

    def version_uri(self, dataset: str, version: str) -> str:
        dataset, version = check_name(dataset, "dataset"), check_name(version, "version")
        try:
            return versions.version_uri(self.root, dataset, version)
        except ValueError as exc:  # a malformed id names no version: 404, not 500
            raise NotFound(f"there is no version {version!r} (not a version id)") from exc

    def run_uri(self, dataset: str, version: str, run: str) -> str:
        parts = (check_name(dataset, "dataset"), check_name(version, "version"),
                 check_name(run, "run"))
        return self._guard(lambda: storage.safe_join(self.root, "models", *parts), "run path")

    # ---- public queries -------------------------------------------------------------------
    def manifest(self, dataset: str, version: str) -> Manifest:
        """The version's manifest, cached: a published manifest never changes.

        A cached entry is re-checked for existence once per listing TTL, because retention
        may delete a version after it was cached.
        """
        uri = self.version_uri(dataset, version)
        what = f"version {dataset}/{version}"
        now = time.monotonic()
        with self._lock:
            hit = self._manifests.get(uri)
            if hit is not None:
                self._manifests.move_to_end(uri)
        if hit is not None:
            if now - hit[1] < self.limits.listing_ttl_s:
                return hit[0]
            still = self._guard(lambda: storage.exists(storage.join(uri, MANIFEST_FILE)), what)
            with self._lock:
                if still:
                    self._manifests[uri] = (hit[0], now)
                else:
                    self._manifests.pop(uri, None)
            if not still:
                raise NotFound(f"{what} no longer exists")
            return hit[0]
        manifest = self._guard(lambda: self._read_manifest(dataset, version, uri), what)
        with self._lock:
            self._manifests[uri] = (manifest, now)
            while len(self._manifests) > self.limits.manifest_cache_size:
                self._manifests.popitem(last=False)
        return manifest

    def _read_manifest(self, dataset: str, version: str, uri: str) -> Manifest:
        """The stored manifest; a version or dataset that is not there is named as such."""
        try:
            return versions.read_manifest(uri)
        except IncompleteVersionError:
            if not storage.exists(self.dataset_uri(dataset)):
                raise NotFound(f"dataset {dataset!r} does not exist") from None
            if not storage.exists(uri):
                raise NotFound(f"dataset {dataset!r} has no version {version!r}") from None
            raise

    def version_ids(self, dataset: str) -> tuple[list[str], bool]:
        """Complete versions, newest first, capped at ``max_items``."""
        self._children(self.dataset_uri(dataset), f"dataset {dataset!r}")
        ids = self._cached_listing(
            ("versions", dataset),
            lambda: self._guard(lambda: versions.list_versions(self.root, dataset), dataset),
        )
        newest_first = list(reversed(ids))
        return newest_first[: self.limits.max_items], len(ids) > self.limits.max_items

    def datasets(self, page: int = 1, per_page: int | None = None,
                 also: Iterable[str] = ()) -> Page[DatasetRow]:
        """Dataset folders with their complete-version count and newest version; ``also``:
        datasets known elsewhere (their DAGs) that may have published nothing yet."""
        root = storage.join(self.root, "datasets")
        try:
            names, truncated = self._children(root, "datasets folder")
        except NotFound:
            names, truncated = [], False
        names = sorted({n for n in [*names, *also] if is_safe_name(n)})
        listing = paginate(names, page, self.clamp(per_page), truncated)

        def row(name: str) -> DatasetRow:
            try:
                ids, _ = self.version_ids(name)
            except NotFound:  # DAGs, no folder yet
                ids = []
            return DatasetRow(name, len(ids), *((ids[0], self.manifest(name, ids[0])) if ids else ()))

        items = list(self._pool.map(row, listing.items))
        return Page(items, listing.page, listing.per_page, listing.total, truncated)

    def _run_names(self, dataset: str, version: str) -> list[str]:
        """Run folders trained on the version, newest first (run names sort by time)."""
        self.version_uri(dataset, version)  # validates both names first
        uri = self._guard(lambda: storage.safe_join(self.root, "models", dataset, version),
                          "models path")
        try:
            runs, _ = self._children(uri, f"models of {dataset}/{version}")
        except NotFound:
            return []
        return [r for r in reversed(runs) if is_safe_name(r)]

    def _metrics(self, dataset: str, version: str, run: str) -> ModelRecord | None:
        """The run's model record (metrics.json), None while it has none."""
        uri = storage.join(self.run_uri(dataset, version, run), METRICS_FILE)
        try:
            obj = self._read_json(uri, f"metrics of run {run!r}")
        except NotFound:
            return None
        try:
            return ModelRecord.from_json(obj, f"metrics of run {run!r}")
        except ValueError as exc:
            raise StorageUnavailable(str(exc)) from exc

    def current_model(self, dataset: str) -> Current | None:
        """The dataset's current (blessed) model: ``models/<dataset>/current.json``, which
        training writes (``training.judge.current``); None when no run was promoted, or the
        pointer is not one (a page is shown without it, as with none)."""
        check_name(dataset, "dataset")  # a dataset with DAGs but no version has no current model
        uri = self._guard(lambda: storage.safe_join(self.root, "models", dataset, CURRENT_FILE),
                          "current model")
        try:
            return Current.from_json(self._read_json(uri, f"current model of {dataset}"), uri)
        except (NotFound, ValueError):
            return None

    def models(self, dataset: str, version: str, limit: int | None = None,
               ) -> tuple[list[ModelRow], int]:
        """Newest ``limit`` runs trained on the version and how many there are in all."""
        runs = self._run_names(dataset, version)
        chosen = runs[: limit or self.limits.max_models_per_version]
        metrics = self._pool.map(lambda r: self._metrics(dataset, version, r), chosen)
        return [ModelRow(r, m) for r, m in zip(chosen, metrics)], len(runs)

    def versions(self, dataset: str, page: int = 1, per_page: int | None = None,
                 models_per_version: int = 5) -> Page[VersionRow]:
        """One page of versions (newest first) with manifests and model summaries.

        Two flat rounds of parallel reads (manifests + run listings, then metrics), never
        nested, so the bounded thread pool cannot deadlock on its own tasks.
        """
        ids, truncated = self.version_ids(dataset)
        listing = paginate(ids, page, self.clamp(per_page), truncated)
        heads = list(self._pool.map(
            lambda v: (self.manifest(dataset, v), self._run_names(dataset, v)), listing.items))
        pairs = [(v, r) for v, (_, runs) in zip(listing.items, heads)
                 for r in runs[:models_per_version]]
        metrics = dict(zip(pairs, self._pool.map(lambda p: self._metrics(dataset, *p), pairs)))
        states = self.states(dataset, listing.items)
        items = [VersionRow(v, manifest, [ModelRow(r, metrics[(v, r)])
                                          for r in runs[:models_per_version]], len(runs),
                            states.get(v, ()))
                 for v, (manifest, runs) in zip(listing.items, heads)]
        return Page(items, listing.page, listing.per_page, listing.total, truncated)

    def states(self, dataset: str, version_ids: list[str]) -> dict[str, tuple[VersionState, ...]]:
        """Each version's training and scoring state, as the runs themselves read them."""
        found = self._pool.map(lambda activity: self._guard(
            lambda: ledger.states(self.root, dataset, activity, version_ids),
            f"{activity} states of {dataset}"), ledger.ACTIVITIES)
        out: dict[str, list[VersionState]] = {v: [] for v in version_ids}
        for per_activity in found:
            for state in per_activity:
                out[state.version].append(state)
        return {v: tuple(s) for v, s in out.items()}

    def model(self, dataset: str, version: str, run: str) -> ModelDetail:
        """Metrics, model card and plot names of one training run."""
        self.manifest(dataset, version)  # a model page needs a complete version
        uri = self.run_uri(dataset, version, run)
        names, _ = self._children(uri, f"model run {dataset}/{version}/{run}")
        plots = [n for n in names if is_image(n)]
        if PLOTS_DIR in names:
            sub, _ = self._children(storage.join(uri, PLOTS_DIR), f"plots of {run!r}")
            plots += [f"{PLOTS_DIR}/{n}" for n in sub if is_image(n)]
        card = None
        if CARD_FILE in names:
            raw = self._read_capped(storage.join(uri, CARD_FILE), self.limits.max_card_bytes,
                                    f"model card of {run!r}")
            card = raw.decode("utf-8", errors="replace")
        return ModelDetail(run, self._metrics(dataset, version, run), card, plots, names)

    def version_file(self, dataset: str, version: str, relpath: str) -> tuple[bytes, str]:
        """A stored file of the version's ``validation/`` folder (the Data Docs site)."""
        parts = check_relpath(relpath, "file path")
        if parts[0] != VALIDATION_DIR or len(parts) < 2:
            raise NotFound(f"only files under {VALIDATION_DIR}/ are served, not {relpath!r}")
        try:
            self.manifest(dataset, version)  # complete versions are browsable
        except NotFound:  # and the results of one judged but not published
            self.unpublished_results(dataset, version)
        uri = self._guard(lambda: storage.safe_join(self.version_uri(dataset, version), *parts),
                          relpath)
        return self._read_capped(uri, self.limits.max_served_bytes, relpath), parts[-1]

    def model_image(self, dataset: str, version: str, run: str, relpath: str) -> tuple[bytes, str]:
        """A PNG/JPEG plot of a run (in the run folder or its ``plots/`` folder)."""
        parts = check_relpath(relpath, "plot path", max_depth=2)
        if not is_image(parts[-1]) or (len(parts) == 2 and parts[0] != PLOTS_DIR):
            raise NotFound(f"{relpath!r} is not a plot of run {run!r}")
        uri = self._guard(lambda: storage.safe_join(self.run_uri(dataset, version, run), *parts),
                          relpath)
        return self._read_capped(uri, self.limits.max_served_bytes, relpath), parts[-1]

    # ---- versions judged but not published (a failed validation) ------------------------
    def unpublished_results(self, dataset: str, version: str) -> dict[str, Any]:
        """The stored ``validation/results.json`` of a version that has no manifest: its
        validation failed (or it is being published). NotFound when it is published, or
        was never judged (a half-written or killed build)."""
        uri = self.version_uri(dataset, version)
        what = f"version {dataset}/{version}"
        if self._guard(lambda: storage.exists(storage.join(uri, MANIFEST_FILE)), what):
            raise NotFound(f"{what} is published: its validation is on its own page")
        results = storage.join(uri, VALIDATION_DIR, RESULTS_FILE)
        if not self._guard(lambda: storage.exists(results), what):
            raise NotFound(f"{what} was not published and stored no validation results")
        return self._read_json(results, f"validation results of {what}")

    def unpublished(self, dataset: str, limit: int = UNPUBLISHED_SHOWN
                    ) -> list[tuple[str, dict[str, Any]]]:
        """(version, results) of the newest ``limit`` versions that were judged but not
        published, newest first: what a failed build left for an operator to read."""
        try:
            names, _ = self._children(self.dataset_uri(dataset), f"dataset {dataset!r}")
        except NotFound:
            return []
        published = set(self.version_ids(dataset)[0])
        candidates = sorted((n for n in names if is_version_id(n) and n not in published),
                            key=versions.version_key, reverse=True)

        def judged(version: str) -> dict[str, Any] | None:
            try:
                return self.unpublished_results(dataset, version)
            except (NotFound, StorageUnavailable):
                return None

        def newest() -> list[tuple[str, dict[str, Any]]]:
            found = []
            for version in candidates:
                results = judged(version)
                if results is not None:
                    found.append((version, results))
                    if len(found) >= limit:
                        break
            return found

        return self._cached_listing(("unpublished", dataset, str(limit)), newest)

    # ---- predictions (``training.score``: predictions/<dataset>/<window>/<model>/) ----------
    def predictions(self, dataset: str, window: str | None = None,
                    model: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """(window, model, manifest) of the dataset's published predictions, newest window
        first, only ``window``'s or ``model``'s when given; folders without a manifest (being
        written, or killed) are not listed."""
        base = self._guard(lambda: storage.safe_join(self.root, PREDICTIONS_DIR,
                                                     check_name(dataset, "dataset")),
                           "predictions path")
        try:
            scored, _ = self._children(base, f"predictions of {dataset}")
        except NotFound:
            return []
        pairs = []
        for w in reversed(scored):
            if (window is None or w == window) and is_safe_name(w):
                found, _ = self._children(storage.join(base, w), f"predictions of {w}")
                pairs += [(w, m) for m in found if (model is None or m == model)
                          and is_safe_name(m)]
        pairs = pairs[: self.limits.max_models_per_version]

        def read(pair: tuple[str, str]) -> dict[str, Any] | None:
            try:
                return self.prediction(dataset, *pair)
            except NotFound:
                return None

        return [(w, m, found) for (w, m), found in zip(pairs, self._pool.map(read, pairs))
                if found is not None]

    def prediction(self, dataset: str, window: str, model: str) -> dict[str, Any]:
        """The manifest of one window's predictions by one model (NotFound until published)."""
        parts = (check_name(dataset, "dataset"), check_name(window, "window"),
                 check_name(model, "model"))
        uri = self._guard(lambda: storage.safe_join(self.root, PREDICTIONS_DIR, *parts,
                                                    versions.MANIFEST), "predictions path")
        return self._read_json(uri, f"predictions {window}/{model} of {dataset}")

