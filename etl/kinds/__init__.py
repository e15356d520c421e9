"""Dataset kinds: a folder per kind (``tabular``, ``images``) holding what is particular to it,
chosen once per spec from its ``kind`` field.

Every kind builds a version through the same chain -- plan the window, build its missing
segments, judge the window (``etl.pipeline.chain``) -- and only the how differs. The shared
machinery knows a kind only through ``DatasetKind``: its spec loader, its window's build
(``BuildRequest`` in, ``Window`` out) and its judgement (``Judged``), each a real function of
the kind's folder. The registry imports the chosen kind's package when a spec asks for it,
and only then: a tabular run executes no images module and an images run no tabular one.
Landing is no part of a run: ``land`` imports the kind's landing module (``KINDS``' second
entry) for ``etl land`` alone. A new kind is a folder and one entry in ``KINDS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from etl.drift_report import DriftReport
from etl.spec.load import spec_kind, spec_path
from etl.spec.model import DatasetSpec, SpecError
from etl.versions.manifest import Manifest
from etl.versions.segment import Metas, SegmentMeta, Statistics

if TYPE_CHECKING:
    from etl.kinds.landing import LandOptions, LandReport
    from etl.write.writer import WriteConfig

S = TypeVar("S", bound=DatasetSpec)  # the kind's spec type
S_co = TypeVar("S_co", bound=DatasetSpec, covariant=True)
C = TypeVar("C")  # what the kind's build hands its judge (a tabular run's inputs)

TABULAR, IMAGES = "tabular", "images"
# kind -> (the module holding its ``KIND``, the module holding its ``land``)
KINDS: dict[str, tuple[str, str]] = {
    TABULAR: ("etl.kinds.tabular.window", "etl.kinds.tabular.land"),
    IMAGES: ("etl.kinds.images.window", "etl.kinds.images.source"),
}


@dataclass(frozen=True)
class BuildRequest(Generic[S]):
    """One run's window, as a kind's build needs it.

    ``previous``: the newest published manifest of the dataset (which segments hold which
    partitions, the label's classes, the statistics drift is measured against), or None.
    ``scratch_uri``: a run-private folder for anything that is not a segment.
    """

    spec: S
    root: str
    start: datetime | None
    end: datetime
    run_id: str
    write: WriteConfig
    dask_address: str | None
    scratch_uri: str
    previous: Manifest | None = None


@dataclass
class Window(Generic[S, C]):
    """The window's segments, built or found, in order; ``context`` is what the kind's
    ``judge`` needs from its build (a tabular run's inputs; images need none)."""

    spec: S  # the spec with its label resolved (classes fixed for this version)
    metas: Metas
    new: list[SegmentMeta]  # segments holding partitions the previous version did not
    built: int  # segments this run built (compactions not counted)
    context: C
    timings: dict[str, float] = field(default_factory=dict)
    previous: Manifest | None = None  # the request's: what drift is measured against


@dataclass(frozen=True)
class Judged:
    """The window's validation summary, its statistics, drift against the previous version
    (None: nothing new, or no previous version) and the label as the window resolved it
    (its classes; None: the spec's as it stands)."""

    summary: dict[str, Any]
    statistics: Statistics
    drift: DriftReport | None = None
    label: Mapping[str, Any] | None = None


class SpecLoader(Protocol[S_co]):
    """A kind's spec loader: by dataset name or spec.yaml path, ``source_uri`` overriding
    where its raw data is; every field checked, errors naming the file and field."""

    def __call__(self, name_or_path: str | Path, source_uri: str | None = None) -> S_co: ...


@dataclass(frozen=True)
class DatasetKind(Generic[S, C]):
    """The stage functions of one kind of dataset.

    ``build(request)`` plans the window and builds the segments no earlier run built;
    ``judge(window, mode, results_uri)`` decides the window (results and Data Docs into
    ``results_uri``; raises ``ValidationFailed``) and gives its statistics and drift.
    """

    name: str
    load_spec: SpecLoader[S]
    build: Callable[[BuildRequest[S]], Window[S, C]]
    judge: Callable[[Window[S, C], str, str], Judged]


def _modules(spec_name: str | Path) -> tuple[str, str]:
    kind = spec_kind(spec_name)
    if kind not in KINDS:
        raise SpecError(f"{spec_path(spec_name)}.kind: expected one of {sorted(KINDS)}, "
                        f"got {kind!r}")
    return KINDS[kind]


def kind_of(spec_name: str | Path) -> DatasetKind[Any, Any]:
    """The kind a spec declares (one YAML read; its loader checks every field), its package
    imported now."""
    return importlib.import_module(_modules(spec_name)[0]).KIND


def load_spec(spec_name: str | Path, source_uri: str | None = None) -> DatasetSpec:
    """The checked spec of either kind; ``source_uri`` overrides where its raw data is."""
    return kind_of(spec_name).load_spec(spec_name, source_uri=source_uri)


def land(root: str, dataset: str, options: LandOptions | None = None) -> LandReport:
    """Land a dataset's upstream files into ``<root>/raw`` (its kind's landing); returns its
    ``LandReport``."""
    from etl.kinds.landing import LandOptions

    lander = importlib.import_module(_modules(dataset)[1]).land
    return lander(root, dataset, options or LandOptions())
