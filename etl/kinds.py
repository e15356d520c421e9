"""Dataset kinds: each kind is one object holding its stage functions, chosen once per spec.

A spec's ``kind`` field (``tabular`` by default, or ``images``) picks one ``DatasetKind``; the
pipeline and ``etl land`` call its functions and never test the kind themselves. Every kind
builds a version through the same chain -- plan the window, build its missing segments,
judge it -- so a kind is its spec loader, its landing and its segment builder. A new kind is
one entry in ``KINDS``. The modules named here import their heavy libraries inside their
functions, so choosing a kind imports no Dask, GX or TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from etl.segments import images as image_segments
from etl.segments import tabular as tabular_segments
from etl.segments.request import BuildRequest, Judged, Window
from etl.sources import images as image_sources
from etl.sources import land as tabular_sources
from etl.spec import images as image_spec
from etl.spec import load as tabular_spec

TABULAR, IMAGES = "tabular", "images"


@dataclass(frozen=True)
class DatasetKind:
    """The stage functions of one kind of dataset.

    load_spec(name, source_uri=) -> spec; land(root, dataset, **options) -> LandReport;
    build(BuildRequest) -> Window (its segments, built or found); judge(window, mode,
    results_uri) -> Judged (validation summary, statistics, drift; raises ValidationFailed).
    ``unit`` is what one landed row is called in messages ("1797 images", not "flights").
    """

    name: str
    load_spec: Callable[..., Any]
    land: Callable[..., Any]
    build: Callable[[BuildRequest], Window]
    judge: Callable[[Window, str, str], Judged]
    unit: str = "rows"


KINDS: dict[str, DatasetKind] = {
    TABULAR: DatasetKind(
        name=TABULAR, load_spec=tabular_spec.load_spec, land=tabular_sources.land,
        build=tabular_segments.build, judge=tabular_segments.judge),
    IMAGES: DatasetKind(
        name=IMAGES, load_spec=image_spec.load_image_spec, land=image_sources.land_images,
        build=image_segments.build, judge=image_segments.judge, unit="images"),
}


def kind_of(spec_name: str) -> DatasetKind:
    """The kind a spec declares (one YAML read; the full load checks every field)."""
    return KINDS[IMAGES if image_spec.is_image_spec(spec_name) else TABULAR]


def load_spec(spec_name: str, source_uri: str | None = None) -> Any:
    """The checked spec of either kind; ``source_uri`` overrides where its raw data is."""
    return kind_of(spec_name).load_spec(spec_name, source_uri=source_uri)


def land(root: str, dataset: str, **options: Any) -> Any:
    """Land a dataset's upstream files into ``<root>/raw``; returns its ``LandReport``."""
    return kind_of(dataset).land(root, dataset, **options)
