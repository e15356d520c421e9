"""A segment's rows: its raw files read, filtered to the window, joined to the lookups.

Reading one raw file (CSV, JSON lines, Parquet) gives string columns, or a clear refusal: every
value stays a string exactly as the file holds it (validation parses and judges it); a file
that is empty, header-only, truncated or not the declared format fails naming the file.
Timestamp columns written in a format other than ISO 8601 (``2012/01/01``, epoch seconds) are
rewritten as ISO 8601 text right after the read, so validation, the window filter, joins and
the transform parse every timestamp one way; a value that does not match its declared format
fails the read, naming the file, the row and the column.

A segment's rows (``read_segment_rows``): only its raw partitions' files are read, as Arrow
tables made one frame; rows are kept when their event time is inside the window -- or
unparseable, so validation can reject them with a reason -- and a row whose event time lies
outside its file's partition is misfiled, set apart with its reason, never silently dropped.
The spec's lookup joins (each right side read once per run, keys not null, first row per key)
are left joins onto those rows, timestamps compared as instants, row count and order kept.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from etl import storage
from etl.errors import PipelineError
from etl.provenance import iso
from etl.segments.plan import RawPartition, source_uri
from etl.spec import Source, Spec

EPOCH_UNITS = {"epoch_s": "s", "epoch_ms": "ms"}
ISO_OUT = "%Y-%m-%dT%H:%M:%SZ"


def parse_timestamps(values: pd.Series, fmt: str | None) -> pd.Series:
    """UTC timestamps from text in ``fmt`` (strftime codes, ``epoch_s``/``epoch_ms``, or None
    for ISO 8601); a value that does not parse becomes NaT."""
    if fmt is None:
        return pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
    if fmt in EPOCH_UNITS:
        numbers = pd.to_numeric(values, errors="coerce")
        return pd.to_datetime(numbers, unit=EPOCH_UNITS[fmt], utc=True, errors="coerce")
    return pd.to_datetime(values, utc=True, errors="coerce", format=fmt)

STRING = pd.StringDtype("pyarrow")  # one string dtype end to end (what Dask normalizes to)


PARQUET_MAGIC = b"PAR1"  # first 4 bytes, and last 4 after the footer and its 4-byte length


class SourceReadError(PipelineError):
    """A raw file cannot be read as the spec describes; names the file and what was expected."""


def _csv_table(raw: bytes, uri: str, source: Source) -> pa.Table:
    opts, headers = source.read, [source.header(c) for c in source.columns]
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
                column_types={h: pa.string() for h in headers},
                include_columns=headers,
                null_values=opts.get("null_values", [""]), strings_can_be_null=True))
    except pa.ArrowKeyError as exc:
        raise SourceReadError(missing_columns(uri, source, _csv_header(raw, opts))) from exc
    except pa.ArrowInvalid as exc:
        raise SourceReadError(f"{uri}: cannot read as CSV ({source.read or 'defaults'}): "
                              f"{exc}") from exc
    if bad:
        raise SourceReadError(f"{uri}: {len(bad)} malformed row(s), first: {bad[0]}")
    return table.rename_columns(list(source.columns))  # headers -> identifiers, here only


def _csv_header(raw: bytes, opts: dict[str, Any]) -> list[str]:
    """The file's header row as the CSV reader splits it (quotes and delimiter honoured)."""
    import csv

    line = raw.split(b"\n", 1)[0].decode(opts.get("encoding", "utf-8"), "replace")
    return next(csv.reader([line.rstrip("\r")], delimiter=opts.get("delimiter", ","),
                           quotechar=opts.get("quote_char", '"')), [])


def missing_columns(uri: str, source: Source, found: list[str]) -> str:
    """The refusal of a file without some of the spec's headers: which are missing (with the
    column that reads each), the header as found, and a likely rename for each missing one
    (a close undeclared header)."""
    wanted = {source.header(c): c for c in source.columns}
    missing = [h for h in wanted if h not in found]
    extra = [h for h in found if h not in wanted]
    renames = [f"{m!r} -> {close[0]!r}" for m in missing
               if (close := difflib.get_close_matches(m, extra, n=1, cutoff=0.6))]
    hint = f"; renamed? {', '.join(renames)}" if renames else ""
    named = [f"{h!r} read as column {wanted[h]!r}" for h in missing if wanted[h] != h]
    reads = f" ({'; '.join(named)})" if named else ""
    return (f"{uri}: missing column(s) {missing}{reads}; expected headers {list(wanted)}, found "
            f"{found}{hint}")


def _as_strings(df: pd.DataFrame, uri: str, source: Source) -> pd.DataFrame:
    """Typed formats (Parquet, JSON) as the same strings a CSV would give: one contract;
    columns found by their headers and named by their identifiers."""
    if any(source.header(c) not in df.columns for c in source.columns):
        raise SourceReadError(missing_columns(uri, source, [str(c) for c in df.columns]))
    out = {}
    for col in source.columns:
        s = df[source.header(col)]
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
    return as_frame(read_source_table(uri, source))


def as_frame(table: pa.Table) -> pd.DataFrame:
    """String columns as the pipeline's one string dtype."""
    return table.to_pandas(types_mapper={pa.string(): STRING}.get)


def read_source_table(uri: str, source: Source) -> pa.Table:
    """``read_source_file`` as an Arrow table: many small files are read as tables and
    concatenated, then turned into one frame (a frame per file costs more than its rows).
    Timestamps in a declared format come out as ISO 8601 text (``parse_timestamps``)."""
    return _normalize_times(_read_table(uri, source), source, uri)


def _read_table(uri: str, source: Source) -> pa.Table:
    fs, path = storage.get_fs(uri)
    try:
        with fs.open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError as exc:
        raise SourceReadError(f"{uri}: source file not found") from exc
    return read_source_bytes(raw, uri, source)


def read_source_bytes(raw: bytes, uri: str, source: Source) -> pa.Table:
    """``raw`` (a whole file, or its header plus whole lines of it) parsed as ``read_source_table``
    parses ``uri``, before timestamp formats: ``etl spec init`` samples blocks of big files."""
    if not raw:
        raise SourceReadError(f"{uri}: empty file (expected at least a header line)")
    if source.format == "csv":
        table = _csv_table(raw, uri, source)
        _check_not_hollow(table.num_rows, uri, source)
        return table
    if source.format == "parquet":
        df = _parquet_frame(raw, uri)
    else:
        try:
            text = raw.decode(source.read.get("encoding", "utf-8"))
            df = pd.read_json(io.StringIO(text), lines=True, dtype=False)
        except (ValueError, OSError) as exc:
            raise SourceReadError(f"{uri}: cannot read as {source.format}: {exc}") from exc
    _check_not_hollow(len(df), uri, source)
    strings = _as_strings(df, uri, source)
    if "null_values" in source.read:  # as for CSV: the tokens the spec reads as null
        strings = strings.mask(strings.isin(source.read["null_values"]))
    return pa.Table.from_pandas(strings, preserve_index=False).cast(
        pa.schema([(c, pa.string()) for c in strings.columns]))


def _normalize_times(table: pa.Table, source: Source, uri: str) -> pa.Table:
    """``table`` with each formatted timestamp column rewritten as ISO 8601 text.

    Raises:
        SourceReadError: a present value does not parse; names file, row (1-based, data rows)
            and column.
    """
    for col, fmt in source.time_formats.items():
        text = table.column(col).to_pandas()
        parsed = parse_timestamps(text, fmt)
        bad = text.notna().to_numpy() & parsed.isna().to_numpy()
        if bad.any():
            row = int(bad.argmax())
            raise SourceReadError(
                f"{uri}: row {row + 1}, column {source.describe(col)}: {text.iloc[row]!r} does "
                f"not parse as a timestamp in format {fmt!r} ({int(bad.sum())} such value(s))")
        iso = parsed.dt.strftime(ISO_OUT).where(parsed.notna(), None)
        table = table.set_column(table.schema.get_field_index(col), col,
                                 pa.array(iso.astype(object), type=pa.string()))
    return table


# --- the lookups -----------------------------------------------------------------------------


def _lookup(root: str, spec: Spec, index: int, dropped: dict[str, int]) -> pd.DataFrame:
    """A join's right side, read once on the client: keys not null, duplicates dropped."""
    join = spec.joins[index]
    source = spec.sources[join.source]
    df = read_source_file(source_uri(root, source), source)
    df = df[list(join.on) + list(join.columns)].dropna(subset=list(join.on))
    before = len(df)
    df = df.drop_duplicates(subset=list(join.on), keep="first")
    dropped[join.source] = before - len(df)
    renamed = {c: join.output_name(c) for c in join.columns}
    df = df.rename(columns=renamed).reset_index(drop=True)
    for k in ts_keys_of(spec, join):  # parsed once here, not in every segment build
        df[_JOIN_PREFIX + k] = _instant(df.pop(k))
    return df


_JOIN_PREFIX = "__join_"


def ts_keys_of(spec: Spec, join: Any) -> list[str]:
    types = spec.sources[join.source].columns
    return [k for k in join.on if types[k] == "timestamp"]


def lookup_instants(right: pd.DataFrame, key: str) -> pd.Series:
    """A lookup's timestamp key ``key`` as the instants the join compares (parsed once, by
    ``read_lookups``)."""
    return right[_JOIN_PREFIX + key]


def _instant(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s, utc=True, errors="coerce", format="ISO8601")


def join_one(left: pd.DataFrame, right: pd.DataFrame, keys: list[str],
              ts_keys: list[str]) -> pd.DataFrame:
    """Left join on keys, timestamps compared as instants (not as strings), row order kept."""
    lk, on = left, list(keys)
    for k in ts_keys:
        lk = lk.assign(**{_JOIN_PREFIX + k: _instant(lk[k])})
        on[on.index(k)] = _JOIN_PREFIX + k
    out = lk.merge(right, how="left", on=on, sort=False)
    return out.drop(columns=[c for c in out.columns if c.startswith(_JOIN_PREFIX)])


def read_lookups(root: str, spec: Spec) -> tuple[list[pd.DataFrame], dict[str, int], list[str]]:
    """(each join's right side, duplicates dropped per lookup, the lookup files' URIs)."""
    dropped: dict[str, int] = {}
    rights = [_lookup(root, spec, i, dropped) for i in range(len(spec.joins))]
    return rights, dropped, [source_uri(root, spec.sources[j.source]) for j in spec.joins]


def join_lookups(df: pd.DataFrame, spec: Spec, rights: list[pd.DataFrame]) -> pd.DataFrame:
    """The spec's lookup joins (row count and order kept: lookups hold one row per key), in
    the spec's columns."""
    for join, right in zip(spec.joins, rights):
        df = join_one(df, right, list(join.on), ts_keys_of(spec, join))
    return df[list(spec.column_types())]


# --- a segment's rows ------------------------------------------------------------------------
@dataclass(frozen=True)
class SegmentRows:
    """A segment's rows inside the window, lookups joined (``rows``), and the rows whose event
    time lies outside their own file's partition (``misfiled``, as they arrived, with one
    reason each in ``reasons``)."""

    rows: pd.DataFrame
    misfiled: pd.DataFrame
    reasons: list[str]


def event_times(df: pd.DataFrame, source: Source) -> pd.Series | None:
    """The rows' event times, parsed (unparseable: NaT); None without an event time."""
    if source.event_time is None:
        return None
    return pd.to_datetime(df[source.event_time], utc=True, errors="coerce", format="ISO8601")


def outside_each(times: pd.Series, bounds: list[tuple[datetime | None, datetime | None]],
                 counts: list[int]) -> np.ndarray:
    """Rows whose event time parsed and lies outside their own file's [start, end) (None:
    unbounded): ``bounds`` and ``counts`` per file, in the frame's order. Unparseable times
    stay, so validation rejects them with a reason."""
    stamps = times.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]")

    def per_row(values: list[datetime | None], unbounded: str) -> np.ndarray:
        edges = np.array([np.datetime64(unbounded, "ns") if v is None else
                          np.datetime64(v.replace(tzinfo=None), "ns") for v in values],
                         dtype="datetime64[ns]")
        return np.repeat(edges, counts)

    lo = per_row([b[0] for b in bounds], "1677-09-22")
    hi = per_row([b[1] for b in bounds], "2262-04-11")
    return ~np.isnat(stamps) & ((stamps < lo) | (stamps >= hi))


def read_files(uris: list[str], source: Source,
               pieces: Sequence[tuple[int, int] | None] | None = None
               ) -> tuple[pd.DataFrame, list[int]]:
    """Every row of some files of ``source``, as they arrived (no time filter, no join), and
    each file's row count: read as Arrow tables, made one frame at the end (a frame per file
    costs more than a one-row day's rows). ``pieces[i] = (j, k)`` keeps only the j-th of k
    consecutive, equal row ranges of file i."""
    tables = [_piece(read_source_table(u, source), piece)
              for u, piece in zip(uris, pieces or [None] * len(uris), strict=True)]
    frame = as_frame(pa.concat_tables(tables) if len(tables) > 1 else tables[0])
    return frame, [t.num_rows for t in tables]


def _piece(table: pa.Table, piece: tuple[int, int] | None) -> pa.Table:
    if piece is None:
        return table
    i, k = piece
    lo, hi = table.num_rows * i // k, table.num_rows * (i + 1) // k
    return table.slice(lo, hi - lo)


def read_segment_rows(partitions: Sequence[RawPartition], spec: Spec,
                      lookups: list[pd.DataFrame]) -> SegmentRows:
    """A segment's rows: those of its consecutive raw partitions inside the window, the
    spec's lookups joined; misfiled rows set apart with their reason, never silently dropped.

    A row of a partition outside the window (a window that cuts a day) is not read. The files
    are read as Arrow tables and made one frame, and both checks run once over it with each
    row's own bounds: a segment of a thousand one-row days costs about what one file of those
    rows does.
    """
    source = spec.primary_source
    raw, counts = read_files([p.uri for p in partitions], source,
                             [p.piece for p in partitions])
    times = event_times(raw, source)
    if times is None:
        return SegmentRows(join_lookups(raw, spec, lookups), raw.iloc[:0], [])
    period = [p.period or (None, None) for p in partitions]
    misfiled = outside_each(times, period, counts)
    reasons = [f"{source.event_time} outside the partition {partitions[i].name} "
               f"[{iso(period[i][0])}, {iso(period[i][1])}) of its file"
               for i in np.repeat(np.arange(len(counts)), counts)[misfiled]]
    elsewhere = outside_each(times, [(p.start, p.end) for p in partitions], counts)
    rows = raw[~misfiled & ~elsewhere].reset_index(drop=True)
    return SegmentRows(join_lookups(rows, spec, lookups), raw[misfiled].copy(), reasons)
