"""Extract: Dask reads the raw files of a run's window, joins the lookups, stages Parquet.

Only the files of the window are listed and read (the spec's date partitioning), rows are kept
when their event time is inside [start, end) -- or unparseable, so validation can reject them
with a reason -- and the small lookup tables are read once and broadcast to every partition.
Values stay strings exactly as the raw files hold them (see ``etl.spec``); no step collects the
dataset into one process: each partition is a group of files read by a worker.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from etl import storage
from etl.errors import PipelineError
from etl.spec import Source, Spec

log = logging.getLogger(__name__)

STRING = pd.StringDtype("pyarrow")  # one string dtype end to end (what Dask normalizes to)
PARTITION_BYTES = 8 * 1024 * 1024  # raw bytes per Dask partition: a few per core at 1x flights
MAX_LISTED_PERIODS = 64  # bounded windows up to this many periods are stat'ed, not listed
PARQUET_MAGIC = b"PAR1"  # first 4 bytes, and last 4 after the footer and its 4-byte length


class SourceFilesError(PipelineError):
    """Files of the window are missing, or no file matched."""


@dataclass(frozen=True)
class Extracted:
    """Where the staged Parquet is and which raw files (with size/mtime) it came from."""

    uri: str
    fingerprint: dict[str, Any]
    partitions: int
    lookup_duplicates: dict[str, int]


def _period_step(granularity: str) -> timedelta:
    return timedelta(hours=1) if granularity == "hour" else timedelta(days=1)


def _floor(ts: datetime, granularity: str) -> datetime:
    ts = ts.replace(minute=0, second=0, microsecond=0)
    return ts if granularity == "hour" else ts.replace(hour=0)


def _source_uri(root: str, source: Source, **fmt: str) -> str:
    rel = source.uri
    for key, value in fmt.items():
        rel = rel.replace("{" + key + "}", value)
    return rel if "://" in rel else storage.safe_join(root, rel)


def _listed_periods(root: str, source: Source, end: datetime) -> dict[datetime, str]:
    """Every landed period of a partitioned source up to ``end`` (an unbounded window)."""
    part = source.partitioning
    pattern = _source_uri(root, source, **{part.placeholder: "*"})
    fs, path = storage.get_fs(pattern)
    prefix, suffix = path.split("*", 1)
    found: dict[datetime, str] = {}
    for match in fs.glob(path):
        text = match[len(prefix):len(match) - len(suffix)] if suffix else match[len(prefix):]
        try:
            period = datetime.strptime(text, part.format).replace(tzinfo=end.tzinfo)
        except ValueError:
            log.warning("ignoring %s: %r does not match %s", match, text, part.format)
            continue
        if period < end:
            found[period] = _source_uri(root, source, **{part.placeholder: text})
    return found


def window_files(root: str, source: Source, start: datetime | None, end: datetime) -> list[str]:
    """URIs of the files holding events in [start, end), checking none is missing."""
    part = source.partitioning
    if part is None:
        return [_source_uri(root, source)]
    step = _period_step(part.granularity)
    first = _floor(start, part.granularity) if start else None
    if first is not None and (end - first) / step <= MAX_LISTED_PERIODS:
        periods = {}
        p = first
        while p < end:
            periods[p] = _source_uri(root, source, **{part.placeholder: p.strftime(part.format)})
            p += step
        present = {p: u for p, u in periods.items() if storage.exists(u)}
    else:
        present = {p: u for p, u in _listed_periods(root, source, end).items()
                   if first is None or p >= first}
        p = first or (min(present) if present else end)
        periods = {}
        while p < end:
            periods[p] = present.get(p, "")
            p += step
    if not present:
        raise SourceFilesError(f"source {source.name!r}: no file of {source.uri} holds events "
                               f"in [{start or 'unbounded'}, {end})")
    missing = sorted(p for p in periods if p not in present)
    if missing and part.require_complete:
        shown = ", ".join(m.strftime(part.format) for m in missing[:10])
        raise SourceFilesError(f"source {source.name!r}: {len(missing)} partition(s) of the "
                               f"window missing ({source.uri}): {shown}")
    return [present[p] for p in sorted(present)]


def fingerprint(uris: list[str]) -> dict[str, Any]:
    """Each source file with size and mtime/generation, plus one sha256 over that list."""
    files = []
    for uri in sorted(uris):
        info = storage.stat(uri)
        files.append({"uri": uri, **{k: v for k, v in info.items() if k != "uri"}})
    digest = hashlib.sha256(json.dumps(files, sort_keys=True, default=str).encode()).hexdigest()
    return {"sha256": digest, "files": files}


def group_files(files: list[dict[str, Any]], target_bytes: int) -> list[list[str]]:
    """Consecutive files in groups of about ``target_bytes``: one Dask partition per group."""
    groups: list[list[str]] = []
    size = target_bytes
    for f in files:
        if size >= target_bytes:
            groups.append([])
            size = 0
        groups[-1].append(f["uri"])
        size += int(f.get("size") or 0)
    return groups


class SourceReadError(PipelineError):
    """A raw file cannot be read as the spec describes; names the file and what was expected."""


def _csv_table(raw: bytes, uri: str, source: Source) -> pa.Table:
    opts = source.read
    bad: list[str] = []

    def on_bad_row(row: Any) -> str:
        bad.append(f"row {row.number}: expected {row.expected_columns} columns, got "
                   f"{row.actual_columns}: {row.text[:120]!r}")
        return "skip"

    try:
        table = pa_csv.read_csv(
            pa.py_buffer(raw),
            read_options=pa_csv.ReadOptions(encoding=opts.get("encoding", "utf-8"),
                                            use_threads=False),
            parse_options=pa_csv.ParseOptions(delimiter=opts.get("delimiter", ","),
                                              quote_char=opts.get("quote_char", '"'),
                                              invalid_row_handler=on_bad_row),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: pa.string() for c in source.columns},
                include_columns=list(source.columns),
                null_values=opts.get("null_values", [""]), strings_can_be_null=True))
    except pa.ArrowKeyError as exc:
        header = raw.split(b"\n", 1)[0].decode("utf-8", "replace").strip().split(",")
        missing = [c for c in source.columns if c not in header]
        raise SourceReadError(f"{uri}: missing column(s) {missing}; expected {list(source.columns)},"
                              f" found {header}") from exc
    except pa.ArrowInvalid as exc:
        raise SourceReadError(f"{uri}: cannot read as CSV ({source.read or 'defaults'}): "
                              f"{exc}") from exc
    if bad:
        raise SourceReadError(f"{uri}: {len(bad)} malformed row(s), first: {bad[0]}")
    return table


def _as_strings(df: pd.DataFrame, uri: str, source: Source) -> pd.DataFrame:
    """Typed formats (Parquet, JSON) as the same strings a CSV would give: one contract."""
    missing = [c for c in source.columns if c not in df.columns]
    if missing:
        raise SourceReadError(f"{uri}: missing column(s) {missing}; expected "
                              f"{list(source.columns)}, found {list(df.columns)}")
    out = {}
    for col in source.columns:
        s = df[col]
        if pd.api.types.is_datetime64_any_dtype(s):
            s = s.dt.strftime("%Y-%m-%dT%H:%M:%SZ") if s.dt.tz is None else s.dt.tz_convert(
                "UTC").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        out[col] = s.astype(object).where(s.notna(), None).map(
            lambda v: v if v is None or isinstance(v, str) else _text(v)).astype(STRING)
    return pd.DataFrame(out)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _check_not_hollow(rows: int, uri: str, source: Source) -> None:
    """A required partition holding only a header is a missing partition in disguise."""
    part = source.partitioning
    if rows == 0 and part is not None and part.require_complete:
        raise SourceReadError(f"{uri}: header only, no data rows; expected at least one row in "
                              f"every {part.granularity} partition (require_complete)")


def _parquet_frame(raw: bytes, uri: str) -> pd.DataFrame:
    """Checked first: a cut-off upload has no footer, and pyarrow's error names no file."""
    if len(raw) < 12 or raw[:4] != PARQUET_MAGIC or raw[-4:] != PARQUET_MAGIC:
        raise SourceReadError(
            f"{uri}: not a valid Parquet file ({len(raw)} bytes; truncated, or not Parquet): "
            f"expected {PARQUET_MAGIC!r} at the start and a footer ending in {PARQUET_MAGIC!r}, "
            f"found {raw[:4]!r} ... {raw[-4:]!r}")
    try:
        return pq.read_table(pa.py_buffer(raw)).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:  # footer there, metadata or pages damaged
        raise SourceReadError(f"{uri}: not a valid Parquet file ({len(raw)} bytes): {exc}") from exc


def read_source_file(uri: str, source: Source) -> pd.DataFrame:
    """One raw file as a frame of string columns (the spec's columns, in spec order)."""
    fs, path = storage.get_fs(uri)
    try:
        with fs.open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError as exc:
        raise SourceReadError(f"{uri}: source file not found") from exc
    if not raw:
        raise SourceReadError(f"{uri}: empty file (expected at least a header line)")
    if source.format == "csv":
        table = _csv_table(raw, uri, source)
        _check_not_hollow(table.num_rows, uri, source)
        return table.to_pandas(types_mapper={pa.string(): STRING}.get)
    if source.format == "parquet":
        df = _parquet_frame(raw, uri)
    else:
        try:
            text = raw.decode(source.read.get("encoding", "utf-8"))
            df = pd.read_json(io.StringIO(text), lines=True, dtype=False)
        except (ValueError, OSError) as exc:
            raise SourceReadError(f"{uri}: cannot read as {source.format}: {exc}") from exc
    _check_not_hollow(len(df), uri, source)
    return _as_strings(df, uri, source)


def _read_group(uris: list[str], source: Source, start: datetime | None,
                end: datetime) -> pd.DataFrame:
    """One partition: the files of a group, rows outside the window dropped."""
    frames = [read_source_file(u, source) for u in uris]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if source.event_time is None:
        return df
    ts = pd.to_datetime(df[source.event_time], utc=True, errors="coerce", format="ISO8601")
    inside = ts < pd.Timestamp(end)
    if start is not None:
        inside &= ts >= pd.Timestamp(start)
    return df[inside | ts.isna()].reset_index(drop=True)


def _lookup(root: str, spec: Spec, index: int, dropped: dict[str, int]) -> pd.DataFrame:
    """A join's right side, read once on the client: keys not null, duplicates dropped."""
    join = spec.joins[index]
    source = spec.sources[join.source]
    df = read_source_file(_source_uri(root, source), source)
    df = df[list(join.on) + list(join.columns)].dropna(subset=list(join.on))
    before = len(df)
    df = df.drop_duplicates(subset=list(join.on), keep="first")
    dropped[join.source] = before - len(df)
    renamed = {c: join.output_name(c) for c in join.columns}
    df = df.rename(columns=renamed).reset_index(drop=True)
    for k in _ts_keys(spec, join):  # parsed once here, not in every partition's task
        df[_JOIN_PREFIX + k] = _instant(df.pop(k))
    return df


_JOIN_PREFIX = "__join_"


def _ts_keys(spec: Spec, join: Any) -> list[str]:
    types = spec.sources[join.source].columns
    return [k for k in join.on if types[k] == "timestamp"]


def _instant(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s, utc=True, errors="coerce", format="ISO8601")


def _join_one(left: pd.DataFrame, right: pd.DataFrame, keys: list[str],
              ts_keys: list[str]) -> pd.DataFrame:
    """Left join on keys, timestamps compared as instants (not as strings), row order kept."""
    lk, on = left, list(keys)
    for k in ts_keys:
        lk = lk.assign(**{_JOIN_PREFIX + k: _instant(lk[k])})
        on[on.index(k)] = _JOIN_PREFIX + k
    out = lk.merge(right, how="left", on=on, sort=False)
    return out.drop(columns=[c for c in out.columns if c.startswith(_JOIN_PREFIX)])


def build_frame(root: str, spec: Spec, start: datetime | None, end: datetime,
                partition_bytes: int = PARTITION_BYTES) -> tuple[dd.DataFrame, dict, dict]:
    """The lazy extracted frame plus the source fingerprint and dropped lookup duplicates."""
    primary = spec.primary_source
    files = window_files(root, primary, start, end)
    lookups: dict[str, int] = {}
    rights = [_lookup(root, spec, i, lookups) for i in range(len(spec.joins))]
    lookup_uris = [_source_uri(root, spec.sources[j.source]) for j in spec.joins]
    fp = fingerprint(files + lookup_uris)
    primary_files = [f for f in fp["files"] if f["uri"] in set(files)]
    groups = group_files(sorted(primary_files, key=lambda f: f["uri"]), partition_bytes)
    meta = pd.DataFrame({c: pd.Series([], dtype=STRING) for c in primary.columns})
    ddf = dd.from_map(_read_group, groups, source=primary, start=start, end=end, meta=meta,
                      enforce_metadata=False, label="read-" + primary.name)
    for join, right in zip(spec.joins, rights):
        ts_keys = _ts_keys(spec, join)
        out_meta = _join_one(ddf._meta, right.iloc[:0], list(join.on), ts_keys)
        # one graph key for the lookup, shared by every partition's task
        shared = dask.delayed(right, pure=True)
        ddf = ddf.map_partitions(_join_one, shared, list(join.on), ts_keys, meta=out_meta)
    return ddf[list(spec.column_types())], fp, lookups


def extract(root: str, spec: Spec, out_uri: str, start: datetime | None, end: datetime,
            partition_bytes: int = PARTITION_BYTES) -> Extracted:
    """Stage the window as Parquet under ``out_uri`` (one file per partition)."""
    ddf, fp, lookups = build_frame(root, spec, start, end, partition_bytes)
    fs, path = storage.get_fs(out_uri)
    ddf.to_parquet(path, filesystem=fs, write_index=False, overwrite=False)
    log.info("extracted %d file(s) of %s into %s (%d partitions)", len(fp["files"]), spec.name,
             out_uri, ddf.npartitions)
    return Extracted(uri=out_uri, fingerprint=fp, partitions=ddf.npartitions,
                     lookup_duplicates=lookups)
