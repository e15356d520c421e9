"""OpenLineage for the ETL, training and scoring tasks, emitted by Airflow's OpenLineage provider.

A platform team's catalog (Marquez, DataHub, Dataplex) should see that a model came from a
version that came from these raw files without opening our UI. The provider emits a
START/COMPLETE event per task; a TaskFlow task has no extractor of its own, so the task
gives its operator a ``get_openlineage_facets_on_complete`` (the hook the provider's default
extractor calls) once it knows what it read and wrote: inputs (the raw sources, the
previous version; the version and the model a score run reads), outputs (the version, the
model, the predictions) and facets (schema, row counts, the
quality verdict and version id in a ``flightpipe_version`` facet). Where events go is
Airflow config (``AIRFLOW__OPENLINEAGE__TRANSPORT``), not code. Imported inside task bodies
only: the provider stays out of DAG parsing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from flightpipe_dags import links

if TYPE_CHECKING:  # parse time stays light: the type only annotates
    from etl.versions.manifest import Manifest

log = logging.getLogger(__name__)

PRODUCER = "https://github.com/flightpipe/flightpipe"
VERSION_FACET_SCHEMA = (f"{PRODUCER}/blob/main/docs/openlineage/"
                        "FlightpipeVersionDatasetFacet.json")


@dataclass(frozen=True)
class Lineage:
    """What one task read and wrote, as storage URIs and facet payloads (plain data)."""

    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    manifest: Manifest | None = None  # the version's: schema, rows, verdict
    model: dict[str, Any] | None = None  # training: {"uri", "metrics"}


def dataset_id(uri: str) -> tuple[str, str]:
    """(namespace, name) by OpenLineage's naming: ``file`` + path, ``gs://bucket`` + key."""
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return "file", parts.path.rstrip("/") or "/"
    return f"{parts.scheme}://{parts.netloc}", parts.path.strip("/")


def raw_sources(spec_name: str, root: str) -> list[str]:
    """The URIs of a dataset's raw sources: each partitioned source's folder (the part of its
    uri before the first ``{placeholder}``), or its file."""
    from etl import storage
    from etl.errors import PipelineError
    from etl.spec import load_spec

    try:
        sources = load_spec(spec_name).sources.values()
    except PipelineError:  # an image spec: one raw folder
        return [storage.join(root, "raw", spec_name)]
    out = []
    for source in sources:
        fixed = source.uri.split("{", 1)[0]
        fixed = fixed.rsplit("/", 1)[0] if "{" in source.uri else fixed
        out.append(fixed if "://" in fixed else storage.join(root, fixed))
    return list(dict.fromkeys(out))


def previous_version(manifest: Manifest, root: str) -> str | None:
    """The URI of the version this one followed (what its drift was measured against)."""
    from etl import storage, versions

    drift = manifest.verdict.drift
    name, vid = str(manifest.dataset), drift.against if drift is not None else None
    if not vid:  # the newest published version older than this one, in the one order
        key = versions.version_key(str(manifest.version))
        older = [v for v in versions.list_versions(root, name) if versions.version_key(v) < key]
        vid = older[-1] if older else None
    return storage.join(root, "datasets", name, vid) if vid else None


def for_version(task: Any, name: str, version_uri: str, root: str) -> None:
    """``publish``'s lineage: the raw sources and the previous version -> the version.
    Lineage is information: a failure to gather it is logged, never fails the publish."""
    try:
        from etl import versions

        manifest = versions.read_manifest(version_uri)
        before = previous_version(manifest, root)
        attach(task, Lineage([*raw_sources(name, root), *([before] if before else [])],
                             [version_uri], manifest))
    except Exception as exc:  # noqa: BLE001 -- any failure: the version is published anyway
        log.warning("OpenLineage: no lineage for %s: %s", version_uri, exc)


def for_model(task: Any, version_uri: str, model_uri: str, metrics: dict[str, Any]) -> None:
    """``train``'s lineage: the version -> the model, with its metrics (never fails train)."""
    try:
        from etl import versions

        attach(task, Lineage([version_uri], [model_uri], versions.read_manifest(version_uri),
                             {"uri": model_uri, "metrics": metrics}))
    except Exception as exc:  # noqa: BLE001 -- the model is written anyway
        log.warning("OpenLineage: no lineage for %s: %s", model_uri, exc)


def for_predictions(task: Any, version_uri: str | None, model_uri: str,
                    predictions_uri: str) -> None:
    """``score``'s lineage: the version (none for raw files) and the model -> the predictions
    (never fails the score run)."""
    try:
        attach(task, Lineage([*([version_uri] if version_uri else []), model_uri],
                             [predictions_uri]))
    except Exception as exc:  # noqa: BLE001 -- the predictions are published anyway
        log.warning("OpenLineage: no lineage for %s: %s", predictions_uri, exc)


def attach(task: Any, lineage: Lineage) -> None:
    """Give this task's operator the facets the provider's default extractor asks for."""
    task.get_openlineage_facets_on_complete = lambda _ti: operator_lineage(lineage)


def operator_lineage(lineage: Lineage) -> Any:
    """The provider's ``OperatorLineage`` of ``lineage``."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    inputs = [InputDataset(*dataset_id(u)) for u in lineage.inputs]
    outputs = []
    for uri in lineage.outputs:
        facets, out_facets = _facets(lineage, uri)
        outputs.append(OutputDataset(*dataset_id(uri), facets=facets,
                                     outputFacets=out_facets))
    return OperatorLineage(inputs=inputs, outputs=outputs)


def _facets(lineage: Lineage, uri: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from openlineage.client.facet_v2 import output_statistics_output_dataset as stats
    from openlineage.client.facet_v2 import schema_dataset

    from etl.versions.manifest import Manifest

    if lineage.manifest is None and lineage.model is None:
        return {}, {}  # predictions: their figures are in their own manifest
    manifest = lineage.manifest or Manifest()
    if lineage.model is not None and uri == lineage.model["uri"]:
        return {"flightpipe_version": version_facet(manifest, lineage.model)}, {}
    fields = []
    if (schema := manifest.schema) is not None:
        fields = [schema_dataset.SchemaDatasetFacetFields(name=n, type=str(f.dtype),
                                                          description=f.kind)
                  for n, f in schema.features.items()]
        fields.append(schema_dataset.SchemaDatasetFacetFields(
            name=schema.label.name, type=str(schema.label.dtype), description="label"))
    rows, size, files = manifest.num_examples, manifest.num_bytes, manifest.num_shards
    return ({"schema": schema_dataset.SchemaDatasetFacet(fields=fields),
             "flightpipe_version": version_facet(manifest, None)},
            {"outputStatistics": stats.OutputStatisticsOutputDatasetFacet(
                rowCount=rows, size=size, fileCount=files)})


def version_facet(manifest: Manifest, model: dict[str, Any] | None) -> Any:
    """The custom ``flightpipe_version`` facet: version id, verdict, drift, rows per split."""
    import attr
    from openlineage.client.facet_v2 import DatasetFacet

    @attr.define
    class FlightpipeVersionDatasetFacet(DatasetFacet):
        version: str
        verdict: str
        drifted: list[str]
        splits: dict[str, int]
        metrics: dict[str, Any] | None = None

        @staticmethod
        def _get_schema() -> str:
            return VERSION_FACET_SCHEMA

    drift = manifest.verdict.drift
    return FlightpipeVersionDatasetFacet(
        version=str(manifest.version), verdict=links.verdict(manifest.validation),
        drifted=list(drift.drifted) if drift is not None else [],
        splits={k: v.num_examples for k, v in manifest.splits.items()},
        metrics=(model or {}).get("metrics"), producer=PRODUCER)
