"""Loading a tabular spec from YAML and checking every field and cross-reference.

A typo fails here with the file and the dotted field named, before any data is touched.
Import-light on purpose (yaml only): the DAG files and the validation stage load specs too.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from etl.spec.labels import parse_label
from etl.spec.model import (
    COMPRESSIONS,
    DEFAULT_MIN_TRAIN_SHARDS,
    DEFAULT_SHARD_BYTES,
    DERIVE_OPS,
    DRIFT_LIMITS,
    FEATURE_DTYPES,
    FEATURE_KINDS,
    FORMATS,
    GRANULARITIES,
    READ_OPTIONS,
    RESERVED_COLUMNS,
    RESERVED_PREFIX,
    UPSTREAMS,
    DriftLimits,
    DriftSpec,
    Feature,
    Join,
    Partitioning,
    Source,
    Spec,
    SpecError,
    check_choice,
    check_name,
    check_relpath,
    column_header,
    column_type,
    get_field,
    parse_split,
    reject_unknown,
)
from etl.spec.scheduling import (
    DEFAULT_SPECS_DIR,
    SETTINGS_KEYS,
    SPEC_FILE,
    DagSettings,
    DuplicateSpecError,
    SpecNotFoundError,
    SpecSettingsError,
    parse_settings,
    search_path,
    spec_file,
)

SPECS_DIR = DEFAULT_SPECS_DIR  # etl/examples: the default of $PIPELINE_SPECS_PATH
TABULAR = "tabular"  # a spec's kind when it declares none
_DATASET = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def spec_path(name_or_path: str | Path) -> Path:
    """Resolve a dataset name (``flights``, found on the specs search path) or a spec.yaml path.

    The search rule lives in ``etl.spec.scheduling`` so the DAG files list the same specs.
    """
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")):
        return Path(text).resolve()
    if not _DATASET.match(text):
        raise SpecError(f"dataset name {text!r}: expected lowercase letters, digits and _")
    try:
        return spec_file(text)
    except (SpecNotFoundError, DuplicateSpecError) as exc:
        raise SpecError(str(exc)) from exc


def spec_kind(name_or_path: str | Path) -> str:
    """The ``kind`` a spec file declares (``tabular`` when absent): one YAML read, so the
    registry (``etl.kinds``) picks the kind's loader, which then checks every field. A file
    that is missing or not YAML reads as ``tabular``, whose loader reports it."""
    path = spec_path(name_or_path)
    if not path.is_file():
        return TABULAR
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return TABULAR  # load_spec reports the YAML error with the file named
    kind = raw.get("kind", TABULAR) if isinstance(raw, dict) else TABULAR
    return kind if isinstance(kind, str) else TABULAR


def check_folder_name(path: Path, name: str, where: str) -> None:
    """A spec in a spec folder is found by its folder's name, so ``name`` must be that name."""
    on_path = path.parent.parent in (*search_path(), DEFAULT_SPECS_DIR)
    if path.name == SPEC_FILE and on_path and path.parent.name != name:
        raise SpecError(f"{where}.name: {name!r} must match its folder {path.parent.name!r}")


def check_settings(raw: dict, where: str) -> DagSettings:
    """The Airflow scheduling, training and tune keys (read by the DAG files), checked here
    too; the manifest carries the training and tune blocks to ``python -m training``."""
    try:
        return parse_settings(raw, where)
    except SpecSettingsError as exc:
        raise SpecError(str(exc)) from exc


def load_spec(name_or_path: str | Path, source_uri: str | None = None) -> Spec:
    """Load and check a spec by dataset name or file path.

    ``source_uri`` replaces the primary source's uri (the DAG's raw-source override).
    """
    path = spec_path(name_or_path)
    if not path.is_file():
        raise SpecError(f"{path}: spec file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    spec = _parse(raw, path)
    if source_uri:
        src = replace(spec.primary_source, uri=check_relpath(source_uri, "source_uri"))
        spec = replace(spec, sources={**spec.sources, spec.primary: src})
    return spec


def _parse_source(name: str, d: dict, where: str) -> Source:
    check_name(name, where)
    reject_unknown(d, ("uri", "format", "read", "event_time", "partitioning", "columns"), where)
    fmt = check_choice(get_field(d, "format", where, str), FORMATS, f"{where}.format")
    uri = check_relpath(get_field(d, "uri", where, str), f"{where}.uri")
    cols = get_field(d, "columns", where, dict)
    if not cols:
        raise SpecError(f"{where}.columns: expected at least one column")
    columns, formats, headers = {}, {}, {}
    for col, decl in cols.items():
        columns[_column_name(col, where)], time_fmt = column_type(decl, f"{where}.columns.{col}")
        if time_fmt is not None:
            formats[col] = time_fmt
        if (header := column_header(decl, col, f"{where}.columns.{col}")) != col:
            headers[col] = header
    _check_headers_unique(columns, headers, where)
    event_time = get_field(d, "event_time", where, str, None)
    if event_time is not None and columns.get(event_time) != "timestamp":
        raise SpecError(f"{where}.event_time: {event_time!r} must be a declared timestamp column")
    part = get_field(d, "partitioning", where, dict, None)
    partitioning = None
    if part is not None:
        pw = f"{where}.partitioning"
        reject_unknown(part, ("placeholder", "format", "granularity", "require_complete"), pw)
        partitioning = Partitioning(
            placeholder=check_name(get_field(part, "placeholder", pw, str, "date"),
                                   f"{pw}.placeholder"),
            format=get_field(part, "format", pw, str, "%Y-%m-%d"),
            granularity=check_choice(get_field(part, "granularity", pw, str, "day"),
                                     GRANULARITIES, f"{pw}.granularity"),
            require_complete=get_field(part, "require_complete", pw, bool, True))
        if "{" + partitioning.placeholder + "}" not in uri:
            raise SpecError(f"{where}.uri: a partitioned source needs "
                            f"{{{partitioning.placeholder}}} in its uri, got {uri!r}")
        if event_time is None:
            raise SpecError(f"{where}.event_time: required when the source is partitioned")
    read = get_field(d, "read", where, dict, {})
    for opt in read:
        check_choice(opt, READ_OPTIONS, f"{where}.read")
    return Source(name=name, uri=uri, format=fmt, columns=columns, read=read, event_time=event_time,
                  partitioning=partitioning, time_formats=formats, headers=headers)


def _column_name(col: Any, where: str) -> str:
    """A column's key is its identifier; a raw header as the key gets the ``source:`` hint."""
    try:
        name = check_name(col, f"{where}.columns")
    except SpecError:
        raise SpecError(
            f"{where}.columns: {col!r} is not an identifier (ASCII letters, digits and _, not "
            f"starting with a digit); key the column by an identifier and give the header as "
            f"its source, e.g. some_name: {{type: string, source: {str(col)!r}}}") from None
    return _not_reserved(name, f"{where}.columns")


def _not_reserved(name: str, where: str) -> str:
    """``name`` unless the pipeline's own frames use it (``RESERVED_COLUMNS``)."""
    if name in RESERVED_COLUMNS or name.startswith(RESERVED_PREFIX):
        raise SpecError(f"{where}: {name!r} is a name the pipeline uses for its own columns "
                        f"({sorted(RESERVED_COLUMNS)}, {RESERVED_PREFIX}*); name the column "
                        f"otherwise, e.g. {name.strip('_')}_col: {{type: ..., source: {name!r}}}")
    return name


def _check_headers_unique(columns: dict[str, str], headers: dict[str, str], where: str) -> None:
    """Two columns reading one header would silently duplicate it: a copy-paste slip."""
    seen: dict[str, str] = {}
    for col in columns:
        header = headers.get(col, col)
        if header in seen:
            raise SpecError(f"{where}.columns.{col}: reads header {header!r}, which column "
                            f"{seen[header]!r} already reads; each header is one column")
        seen[header] = col



def _parse_join(d: dict, where: str, sources: dict[str, Source], left: dict[str, str]) -> Join:
    reject_unknown(d, ("source", "keys", "columns", "prefix"), where)
    src = get_field(d, "source", where, str)
    if src not in sources:
        raise SpecError(f"{where}.source: {src!r} is not one of the sources {sorted(sources)}")
    right = sources[src].columns
    on = tuple(get_field(d, "keys", where, list))
    for col in on:
        if col not in left or col not in right:
            raise SpecError(f"{where}.keys: {col!r} must be a column of both sides")
    cols = tuple(get_field(d, "columns", where, list))
    join = Join(source=src, on=on, columns=cols, prefix=get_field(d, "prefix", where, str, ""))
    for col in cols:
        if col not in right:
            raise SpecError(f"{where}.columns: {col!r} is not a column of source {src!r}")
        out = _not_reserved(check_name(join.output_name(col), f"{where}.prefix"),
                            f"{where}.prefix")
        if out in left:
            raise SpecError(f"{where}: output column {out!r} collides with an existing column; "
                            f"set a prefix")
    return join


def _parse_feature(d: dict, where: str, available: set[str], exclude: set[str]) -> Feature:
    reject_unknown(d, ("name", "kind", "dtype", "derive", "fill"), where)
    name = _not_reserved(check_name(get_field(d, "name", where, str), f"{where}.name"),
                         f"{where}.name")
    kind = check_choice(get_field(d, "kind", where, str), FEATURE_KINDS, f"{where}.kind")
    default_dtype = "string" if kind == "categorical" else "float32"
    dtype = check_choice(get_field(d, "dtype", where, str, default_dtype), FEATURE_DTYPES,
                         f"{where}.dtype")
    if dtype not in (("string", "int64") if kind == "categorical" else ("float32", "int64")):
        raise SpecError(f"{where}.dtype: {dtype!r} does not fit kind {kind!r}")
    derive = get_field(d, "derive", where, dict, {"op": "copy", "columns": [name]})
    op = check_choice(get_field(derive, "op", f"{where}.derive", str), tuple(DERIVE_OPS),
                      f"{where}.derive.op")
    inputs = tuple(get_field(derive, "columns", f"{where}.derive", list))
    if len(inputs) not in DERIVE_OPS[op]:
        takes = " or ".join(map(str, DERIVE_OPS[op]))
        raise SpecError(f"{where}.derive.columns: op {op!r} takes {takes} column(s), "
                        f"got {list(inputs)}")
    for col in inputs:
        if col in exclude:
            raise SpecError(f"{where}: uses excluded (leakage) column {col!r}")
        if col not in available:
            raise SpecError(f"{where}.derive.columns: {col!r} is not an extracted column")
    fill = d.get("fill")
    if kind == "numeric" and not (fill is None or fill == "mean" or _is_number(fill)):
        raise SpecError(f"{where}.fill: expected a number or 'mean', got {fill!r}")
    if fill == "mean" and dtype != "float32":
        raise SpecError(f"{where}.fill: 'mean' needs dtype float32 (a missing value is stored "
                        f"as NaN and the model imputes the train mean), got dtype {dtype!r}")
    if kind == "categorical" and fill is not None and not isinstance(fill, (str, int)):
        raise SpecError(f"{where}.fill: expected a string, got {fill!r}")
    return Feature(name=name, kind=kind, dtype=dtype, derive=op, inputs=inputs, fill=fill)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)



def _parse(raw: Any, path: Path) -> Spec:
    """Build a Spec from parsed YAML, checking every cross-reference."""
    w = str(path)
    if not isinstance(raw, dict):
        raise SpecError(f"{w}: expected a mapping at the top level")
    if raw.get("kind", TABULAR) != TABULAR:
        raise SpecError(f"{w}.kind: {raw['kind']!r} is not a tabular spec (image specs load "
                        f"with etl.kinds.images.spec)")
    reject_unknown(raw, ("kind", "name", "description", "sources", "primary", "joins", "key",
                         "label", "exclude", "features", "split", "expectations", "shards",
                         "upstream", "drift", *SETTINGS_KEYS), w)
    name = get_field(raw, "name", w, str)
    if not _DATASET.match(name):
        raise SpecError(f"{w}.name: expected lowercase letters, digits and _, got {name!r}")
    check_folder_name(path, name, w)
    settings = check_settings(raw, w)
    sources = {n: _parse_source(n, d if isinstance(d, dict) else {}, f"{w}.sources.{n}")
               for n, d in get_field(raw, "sources", w, dict).items()}
    try:
        return _parse_uses(raw, path, name, sources, settings)
    except SpecError as exc:
        raise _header_hint(exc, sources) from None


def _header_hint(exc: SpecError, sources: dict[str, Source]) -> SpecError:
    """A field that names a column by its file header gets told the identifier to use."""
    for src in sources.values():
        for col, header in src.headers.items():
            if repr(header) in str(exc):
                return SpecError(f"{exc}; {header!r} is the header of column {col!r} of source "
                                 f"{src.name!r}: every field after sources.*.columns names "
                                 f"columns by identifier")
    return exc


def _parse_uses(raw: dict, path: Path, name: str, sources: dict[str, Source],
                settings: DagSettings) -> Spec:
    """The fields that use the sources' columns (joins, key, label, features, split)."""
    w = str(path)
    primary = get_field(raw, "primary", w, str)
    if primary not in sources:
        raise SpecError(f"{w}.primary: {primary!r} is not one of the sources {sorted(sources)}")
    available = dict(sources[primary].columns)
    joins = []
    for i, d in enumerate(get_field(raw, "joins", w, list, [])):
        join = _parse_join(d, f"{w}.joins[{i}]", sources, available)
        available.update({join.output_name(c): sources[join.source].columns[c]
                          for c in join.columns})
        joins.append(join)
    key = tuple(get_field(raw, "key", w, list))
    if not key or any(k not in sources[primary].columns for k in key):
        raise SpecError(f"{w}.key: expected columns of the primary source, got {list(key)}")
    exclude = tuple(check_name(c, f"{w}.exclude") for c in get_field(raw, "exclude", w, list, []))
    label = parse_label(get_field(raw, "label", w, dict), f"{w}.label", available)
    _not_reserved(label.name, f"{w}.label.name")
    features, seen = [], {label.name}
    for i, d in enumerate(get_field(raw, "features", w, list)):
        feat = _parse_feature(d, f"{w}.features[{i}]", set(available), set(exclude))
        if feat.name in seen or feat.name in exclude:
            raise SpecError(f"{w}.features[{i}].name: {feat.name!r} is a duplicate, the label "
                            f"or an excluded column")
        seen.add(feat.name)
        features.append(feat)
    expectations = check_relpath(get_field(raw, "expectations", w, str), f"{w}.expectations")
    return Spec(name=name, path=path, primary=primary, sources=sources, joins=tuple(joins),
                key=key, label=label, features=tuple(features), exclude=exclude,
                split=parse_split(get_field(raw, "split", w, dict), f"{w}.split",
                                  sources[primary].columns),
                expectations=(path.parent / expectations).resolve(),
                description=str(raw.get("description", "")), upstream=_upstream(raw, w),
                training=dict(settings.training), tune=dict(settings.tune), drift=parse_drift(raw, w, {*seen, label.name}),
                **parse_shards(raw, w))



def _upstream(raw: dict, w: str) -> dict[str, Any]:
    """Where ``etl land`` gets the raw files (``from``: one of UPSTREAMS); {} = landed by hand."""
    up = get_field(raw, "upstream", w, dict, {})
    if up:
        check_choice(up.get("from"), UPSTREAMS, f"{w}.upstream.from")
    return dict(up)


def parse_shards(raw: dict, w: str) -> dict[str, Any]:
    """The ``shards`` section (tabular and image specs): target size, compression, minimum."""
    shards = get_field(raw, "shards", w, dict, {})
    reject_unknown(shards, ("target_bytes", "compression", "min_train_shards"), f"{w}.shards")
    target = get_field(shards, "target_bytes", f"{w}.shards", int, DEFAULT_SHARD_BYTES)
    if target <= 0:
        raise SpecError(f"{w}.shards.target_bytes: expected a positive byte count, got {target}")
    least = get_field(shards, "min_train_shards", f"{w}.shards", int, DEFAULT_MIN_TRAIN_SHARDS)
    if least < 1:
        raise SpecError(f"{w}.shards.min_train_shards: expected an integer >= 1, got {least}")
    return {"shard_target_bytes": target, "min_train_shards": least,
            "compression": check_choice(shards.get("compression"), COMPRESSIONS,
                                        f"{w}.shards.compression")}


def _limits(d: Any, where: str, base: DriftLimits, allow_calendar: bool) -> DriftLimits:
    if not isinstance(d, dict):
        raise SpecError(f"{where}: expected a mapping like {{mean_shift: 0.5}}, got {d!r}")
    reject_unknown(d, (*DRIFT_LIMITS, "calendar") if allow_calendar else DRIFT_LIMITS, where)
    values: dict[str, Any] = {}
    for key in DRIFT_LIMITS:
        value = get_field(d, key, where, (int, float), None)
        if value is not None and value <= 0:
            raise SpecError(f"{where}.{key}: expected a positive number, got {value!r}")
        if key == "null_share" and value is not None and value > 1:
            raise SpecError(f"{where}.null_share: expected a share in (0, 1], got {value!r}")
        if value is not None:
            values[key] = float(value)
    if allow_calendar:
        values["calendar"] = get_field(d, "calendar", where, bool, False)
    return replace(base, **values)


def parse_drift(raw: dict, where: str, features: set[str]) -> DriftSpec:
    """The ``drift`` block of a spec (``where``: the file); names must be features."""
    block = get_field(raw, "drift", where, dict, {})
    w = f"{where}.drift"
    reject_unknown(block, ("default", "features"), w)
    default = _limits(get_field(block, "default", w, dict, {}), f"{w}.default", DriftLimits(),
                      False)
    own = {}
    for name, d in get_field(block, "features", w, dict, {}).items():
        if name not in features:
            raise SpecError(f"{w}.features.{name}: not a feature or the label of this spec; "
                            f"expected one of {sorted(features)}")
        own[name] = _limits(d, f"{w}.features.{name}", default, True)
    return DriftSpec(default, own)
