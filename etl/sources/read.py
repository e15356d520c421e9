"""Reading one raw file (CSV, JSON lines, Parquet) into string columns, or a clear refusal.

Every value stays a string exactly as the file holds it (validation parses and judges it); a
file that is empty, header-only, truncated or not the declared format fails naming the file.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from etl import storage
from etl.errors import PipelineError
from etl.sources.times import ISO_OUT, parse_timestamps
from etl.spec import Source

STRING = pd.StringDtype("pyarrow")  # one string dtype end to end (what Dask normalizes to)


PARQUET_MAGIC = b"PAR1"  # first 4 bytes, and last 4 after the footer and its 4-byte length


def source_uri(root: str, source: Source, **fmt: str) -> str:
    """A source file's URI: its pattern with ``fmt`` filled in, under ``root`` unless it is
    an absolute URI."""
    rel = source.uri
    for key, value in fmt.items():
        rel = rel.replace("{" + key + "}", value)
    return rel if "://" in rel else storage.safe_join(root, rel)



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
    import difflib

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
    Timestamps in a declared format come out as ISO 8601 text (``etl.sources.times``)."""
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
