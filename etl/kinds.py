"""Dataset kinds: each kind carries its stage functions, chosen once per spec.

A spec's ``kind`` field (``tabular`` by default, or ``images``) picks one ``DatasetKind``; the
pipeline steps and ``etl land`` call its functions and never test the kind themselves. A new
kind is one entry in ``KINDS``. Stage functions are named ``"module:function"`` and imported on
first use, so choosing a kind imports nothing heavy (the DAG files and the CLI stay cheap).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from etl.spec.images import is_image_spec

TABULAR, IMAGES = "tabular", "images"


@dataclass(frozen=True)
class DatasetKind:
    """The stage functions of one kind of dataset, by ``"module:function"`` name.

    load_spec(name, source_uri) -> spec; land(root, dataset, **options) -> LandReport;
    extract(root, spec, staged_uri, start, end, **options) -> Extracted;
    validate(ddf, spec, mode, results_uri=, quarantine_uri=) -> ValidationOutcome;
    prepare(validated_ddf, spec, previous_label) -> (frame for the shard writer, manifest
    statistics); ``previous_label`` is the newest published version's ``schema.label``.
    ``preload`` lists modules worth importing in the background while Dask workers start.
    ``unit`` is what one landed row is called in messages ("1797 images", not "flights").
    ``incremental``: the kind can build a version from segments (``etl.pipeline.incremental``).
    ``input_bytes(root, spec, start, end, limit)`` -> the raw bytes a window reads, so a small
    one runs without a Dask cluster (``etl.cluster.IN_PROCESS_BYTES``); a kind without it always
    starts one.
    """

    name: str
    load_spec: str
    land: str
    extract: str
    validate: str
    prepare: str
    unit: str = "rows"
    preload: tuple[str, ...] = ()
    incremental: bool = False  # builds versions from per-partition segments (etl run --incremental)
    input_bytes: str | None = None

    def stage(self, stage: str) -> Callable[..., Any]:
        """The function behind ``stage`` (one of the fields above), imported now."""
        module, _, attr = getattr(self, stage).partition(":")
        return getattr(importlib.import_module(module), attr)


KINDS: dict[str, DatasetKind] = {
    TABULAR: DatasetKind(
        name=TABULAR, load_spec="etl.spec.load:load_spec", land="etl.sources.land:land",
        extract="etl.sources.extract:extract", validate="etl.validation.tabular:validate_dataset",
        prepare="etl.transform.tabular:prepare_for_write", preload=("etl.validation.tabular",),
        incremental=True, input_bytes="etl.sources.extract:window_bytes"),
    IMAGES: DatasetKind(
        name=IMAGES, load_spec="etl.spec.images:load_image_spec",
        land="etl.sources.images:land_images", extract="etl.sources.images:extract",
        validate="etl.validation.images:validate_dataset",
        prepare="etl.transform.images:prepare_for_write", unit="images"),
}


def kind_of(spec_name: str) -> DatasetKind:
    """The kind a spec declares (one YAML read; the full load checks every field)."""
    return KINDS[IMAGES if is_image_spec(spec_name) else TABULAR]


def load_spec(spec_name: str, source_uri: str | None = None) -> Any:
    """The checked spec of either kind; ``source_uri`` overrides where its raw data is."""
    return kind_of(spec_name).stage("load_spec")(spec_name, source_uri=source_uri)


def land(root: str, dataset: str, **options: Any) -> Any:
    """Land a dataset's upstream files into ``<root>/raw``; returns its ``LandReport``."""
    return kind_of(dataset).stage("land")(root, dataset, **options)
