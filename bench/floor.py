"""The ETL's floor: one process doing only what any ETL of the spec must do, no validation.

pyarrow reads the landed CSVs of the window (typed as the spec says), the spec's lookup joins
run in Arrow, the project's feature code (``etl.kinds.tabular.prepare.prepare_rows``: derived
features, constant fills, label, split) makes the Examples' columns, the project's vectorized
encoder serializes them and the project's streaming TFRecord writer writes one file per split
and group of files (``GROUP_BYTES`` of CSV at a time, so memory stays bounded at 16x).
Left out on purpose: validation, statistics and mean fills (NaN is encoded instead), the
shuffle, Dask, staging, the manifest. ``python -m bench.floor`` prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from etl import storage
from etl.kinds.tabular.prepare import prepare_rows
from etl.provenance import utc
from etl.segments.plan import group_by_size, source_uri, window_files
from etl.spec import Source, Spec, load_spec
from etl.versions.segment import Schema
from etl.write import shards
from etl.write.writer import SPLIT_COL

ARROW = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
         "timestamp": pa.timestamp("s", tz="UTC")}
CHUNK_ROWS = 65536  # rows per encoder call
GROUP_BYTES = 64 * 2**20  # raw CSV bytes read, joined and written at a time


def read_csv(uri: str, source: Source) -> pa.Table:
    """One landed file, typed by pyarrow's C++ parser as the spec declares its columns."""
    opts = source.read
    with storage.open_read(uri) as fh:
        return pa_csv.read_csv(
            fh, read_options=pa_csv.ReadOptions(encoding=opts.get("encoding", "utf-8")),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: ARROW[t] for c, t in source.columns.items()},
                include_columns=list(source.columns),
                null_values=opts.get("null_values", [""]), strings_can_be_null=True))


def _window(table: pa.Table, source: Source, start: datetime | None, end: datetime) -> pa.Table:
    if source.event_time is None:
        return table
    ts = table.column(source.event_time)
    inside = pc.less(ts, pa.scalar(end, ts.type))
    if start is not None:
        inside = pc.and_(inside, pc.greater_equal(ts, pa.scalar(start, ts.type)))
    return table.filter(pc.or_kleene(inside, pc.is_null(ts)))


def _lookup(root: str, spec: Spec, index: int) -> pa.Table:
    """A join's right side: keys not null, first row per key kept, columns renamed."""
    join = spec.joins[index]
    source = spec.sources[join.source]
    table = read_csv(source_uri(root, source), source).select([*join.on, *join.columns])
    for key in join.on:
        table = table.filter(pc.is_valid(table.column(key)))
    rows = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    first = rows.group_by(list(join.on), use_threads=False).aggregate([("__row", "min")])
    table = table.take(first.column("__row_min"))
    return table.rename_columns([c if c in join.on else join.output_name(c)
                                 for c in table.column_names])


def file_groups(root: str, spec: Spec, start: datetime | None, end: datetime,
                group_bytes: int | None = None) -> list[list[str]]:
    """The window's primary files in consecutive groups of about ``group_bytes``."""
    group_bytes = group_bytes or GROUP_BYTES
    files = window_files(root, spec.primary_source, start, end)
    return group_by_size(files, lambda uri: int(storage.stat(uri).get("size") or 0),
                         group_bytes)


def extract(uris: list[str], spec: Spec, lookups: list[pa.Table], start: datetime | None,
            end: datetime) -> pa.Table:
    """One group's rows with the lookups joined (Arrow hash joins, order not kept)."""
    primary = spec.primary_source
    table = _window(pa.concat_tables([read_csv(u, primary) for u in uris]), primary, start, end)
    for join, right in zip(spec.joins, lookups):
        table = table.join(right, keys=list(join.on), join_type="left outer")
    return table


def _records(frame: pd.DataFrame, columns: list[str], schema: Schema) -> Iterator[bytes]:
    for i in range(0, len(frame), CHUNK_ROWS):
        yield from shards.encode_batch_vectorized(frame.iloc[i:i + CHUNK_ROWS][columns], schema)


def run(root: str, dataset: str, out_dir: str, interval_end: str,
        interval_start: str | None = None) -> dict[str, Any]:
    """Read, join, encode and write the window group by group (memory bounded by a group);
    one file per split and group. Returns records per split and where the time went."""
    spec = load_spec(dataset)
    end, start = utc(interval_end, "interval_end"), utc(interval_start, "interval_start")
    t0, c0 = time.perf_counter(), time.process_time()
    lookups = [_lookup(root, spec, i) for i in range(len(spec.joins))]
    schema = Schema.from_json(spec.manifest_schema(), f"{spec.path}: its schema")
    columns = schema.columns
    splits = {split: 0 for split, _ in spec.split.fractions}
    spent = {"read_join_s": 0.0, "features_s": 0.0, "encode_write_s": 0.0}
    source_rows = 0
    for index, group in enumerate(file_groups(root, spec, start, end)):
        marks = [time.perf_counter()]
        table = extract(group, spec, lookups, start, end)
        source_rows += table.num_rows
        marks.append(time.perf_counter())
        frame = prepare_rows(table.to_pandas(), spec)
        marks.append(time.perf_counter())
        for split in splits:
            part = frame[frame[SPLIT_COL] == split]
            uri = storage.join(out_dir, f"{spec.name}-{split}.tfrecord-{index:05d}")
            splits[split] += shards.write_shard(uri, _records(part, columns, schema))["records"]
        marks.append(time.perf_counter())
        for key, (a, b) in zip(spent, pairwise(marks), strict=True):
            spent[key] += b - a
    wall = time.perf_counter() - t0
    rows = sum(splits.values())
    return {"rows": rows, "splits": splits, "work_s": wall, "rows_per_s": rows / wall,
            "cpu_s_in_process": time.process_time() - c0, "source_rows": source_rows,
            "timings": spent}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True)
    parser.add_argument("--dataset", default="flights")
    parser.add_argument("--out", required=True, help="folder for the TFRecord files")
    parser.add_argument("--interval-end", default="2014-01-01T00:00:00Z")
    parser.add_argument("--interval-start", default=None)
    args = parser.parse_args(argv)
    Path(storage.get_fs(args.out)[1]).mkdir(parents=True, exist_ok=True)
    print(json.dumps(run(args.root, args.dataset, args.out, args.interval_end,
                         args.interval_start)))


if __name__ == "__main__":
    main()
