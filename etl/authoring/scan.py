"""Which rows ``spec init`` reads: every row of every file within a byte budget, else a uniform
sample of blocks drawn from all files and all row ranges (never the head or the newest files).

Every piece is parsed by the ETL's own reader (``etl.kinds.tabular.read.read_source_bytes``, what
``read_source_table`` runs on a whole file), every value a string, so the profile sees what
extraction hands validation. Pieces are profiled in parallel on Dask (``etl.cluster``: this
process's threads for small reads, a LocalCluster for big ones) and the partials merged.
"""

from __future__ import annotations

import io
import itertools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from etl import storage
from etl.authoring import DEFAULT_BUDGET_BYTES
from etl.authoring.partitions import RawFile
from etl.authoring.profile import Origin, TablePartial, merge_all, profile_frame, value_hashes
from etl.kinds.tabular.read import SourceReadError, as_frame, read_source_bytes
from etl.segments.plan import group_by_size
from etl.spec import Source

MAX_BLOCK_BYTES = 2**20  # a sampled block: about a thousand rows of a typical table
MIN_BLOCK_BYTES = 512
BLOCKS_PER_BUDGET = 64  # a small budget still draws this many blocks, from that many places
TASK_BYTES = 16 * 2**20  # raw bytes of consecutive pieces profiled by one Dask task
ONE_PASS_BYTES = 64 * 2**20  # up to this, key columns' hashes come back with the profile
CSV_NULLS = ["", "NA", "NaN", "null"]  # what a drafted CSV source reads as null before tokens


@dataclass(frozen=True)
class Piece:
    """A whole file (``length`` None) or a block of it: bytes [offset, offset + length) of a
    text file, row groups [offset, offset + length) of a Parquet file."""

    file: RawFile
    offset: int = 0
    length: int | None = None
    nbytes: int = 0  # raw bytes it stands for

    @property
    def bytes(self) -> int:
        return self.file.size if self.length is None else self.nbytes


@dataclass
class Scan:
    """What was read, and the merged profile of it."""

    table: TablePartial
    pieces: list[Piece]
    fmt: str
    total_files: int
    total_bytes: int
    budget: int

    @property
    def full(self) -> bool:
        return self.total_bytes <= self.budget

    def describe(self) -> str:
        files = len({p.file.uri for p in self.pieces})
        if self.full:
            return (f"profiled all {self.table.rows:,} rows of {files:,} file"
                    f"{'s' if files != 1 else ''}")
        return (f"sampled {self.table.rows:,} rows across {files:,} of {self.total_files:,} "
                f"files (their {_mib(self.total_bytes)} exceed the budget of "
                f"{_mib(self.budget)}: blocks drawn uniformly from all files and row ranges)")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def source_for(fmt: str, headers: list[str], read: dict[str, Any] | None = None) -> Source:
    """The reader's Source for these raw columns, every one a string."""
    read = read if read is not None else ({"null_values": CSV_NULLS} if fmt == "csv" else {})
    return Source(name="draft", uri="", format=fmt, columns=dict.fromkeys(headers, "string"),
                  read=read)


def plan(files: list[RawFile], fmt: str, budget: int, seed: int = 0) -> list[Piece]:
    """Every file whole within the budget; else blocks chosen uniformly at random among all
    blocks of all files (a seeded permutation, taken until the budget is spent)."""
    if sum(f.size for f in files) <= budget:
        return [Piece(f) for f in files]
    size = max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, budget // BLOCKS_PER_BUDGET))
    blocks: list[Piece] = []
    for f in files:
        if f.size <= size:
            blocks.append(Piece(f))
        elif fmt == "parquet":
            groups = _row_groups(f.uri)
            per = max(1, int(size * groups / f.size))
            blocks += [Piece(f, g, min(per, groups - g), f.size * min(per, groups - g) // groups)
                       for g in range(0, groups, per)]
        else:
            blocks += [Piece(f, o, min(size, f.size - o), min(size, f.size - o))
                       for o in range(0, f.size, size)]
    order = np.random.default_rng(seed).permutation(len(blocks))
    chosen, spent = [], 0
    for i in order:
        if spent >= budget:
            break
        chosen.append(blocks[i])
        spent += blocks[i].bytes
    rank = {f.uri: i for i, f in enumerate(files)}
    return sorted(chosen, key=lambda p: (rank[p.file.uri], p.offset))


def _row_groups(uri: str) -> int:
    fs, path = storage.get_fs(uri)
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).num_row_groups


def _raw(piece: Piece, fmt: str) -> bytes:
    """The bytes the reader parses: a whole file, header + whole lines of a block, or the
    chosen row groups as a Parquet file of their own."""
    fs, path = storage.get_fs(piece.file.uri)
    with fs.open(path, "rb") as f:
        if piece.length is None:
            return f.read()
        if fmt == "parquet":
            table = pq.ParquetFile(f).read_row_groups(
                list(range(piece.offset, piece.offset + piece.length)))
            out = io.BytesIO()
            pq.write_table(table, out)
            return out.getvalue()
        head = f.readline() if fmt == "csv" else b""
        f.seek(piece.offset)
        block = f.read(piece.length) + f.readline()  # the last line whole
    if piece.offset == 0:
        return block
    return head + block.split(b"\n", 1)[1] if b"\n" in block else head


def headers_of(raw: bytes, fmt: str, source: Source) -> list[str]:
    """The raw column names, as the file writes them."""
    if fmt == "csv":
        end = raw.find(b"\n")
        line = raw if end < 0 else raw[:end + 1]
        return pa_csv.read_csv(pa.py_buffer(line), parse_options=pa_csv.ParseOptions(
            delimiter=source.read.get("delimiter", ","))).column_names
    if fmt == "parquet":
        return list(pq.read_schema(pa.py_buffer(raw)).names)
    lines = [ln for ln in raw.splitlines()[:1000] if ln.strip()]
    return list(dict.fromkeys(k for ln in lines for k in json.loads(ln)))


def read_piece(piece: Piece, fmt: str, columns: list[str] | None = None) -> pa.Table:
    """One piece as extraction reads it: string columns (all, or ``columns``)."""
    raw = _raw(piece, fmt)
    source = source_for(fmt, columns or headers_of(raw, fmt, source_for(fmt, [])))
    return read_source_bytes(raw, piece.file.uri, source)


def profile_pieces(pieces: list[tuple[int, Piece]], fmt: str, keep_hashes: bool
                   ) -> TablePartial:
    """One Dask task: its pieces read, consecutive ones with one header profiled as one frame
    (a sampled block that a quoted line break cut mid-row is skipped; a whole file that fails
    fails the draft, as it would fail the run)."""
    read: list[tuple[Piece, pa.Table]] = []
    for _, piece in pieces:
        try:
            read.append((piece, read_piece(piece, fmt)))
        except SourceReadError:
            if piece.length is None:
                raise
    parts = []
    for n, (_, group) in enumerate(itertools.groupby(read, key=lambda pt: pt[1].column_names)):
        group = list(group)
        origin = Origin(tuple(p.file.uri for p, _ in group), tuple(t.num_rows for _, t in group),
                        tuple(p.file.period for p, _ in group))
        frame = as_frame(pa.concat_tables([t for _, t in group]))
        parts.append(profile_frame(frame, origin, pieces[0][0] * 1000 + n, keep_hashes))
    return merge_all(parts)


def column_hashes(pieces: list[tuple[int, Piece]], fmt: str, columns: list[str]
                  ) -> dict[str, np.ndarray]:
    """One Dask task: each column's 64-bit value hash per row of its pieces (key checks)."""
    frame = as_frame(pa.concat_tables([read_piece(p, fmt, columns) for _, p in pieces]))
    return {c: value_hashes(frame[c]) for c in columns}


def _tasks(pieces: list[Piece]) -> list[list[tuple[int, Piece]]]:
    return group_by_size(list(enumerate(pieces)), lambda ip: ip[1].bytes, TASK_BYTES)


def _compute(fn: Any, pieces: list[Piece], work_bytes: int, address: str | None,
             *args: Any) -> list[Any]:
    import dask

    from etl.cluster import dask_client

    with dask_client(address, work_bytes=work_bytes):
        return list(dask.compute(*[dask.delayed(fn, pure=False)(t, *args)
                                   for t in _tasks(pieces)]))


def scan(files: list[RawFile], fmt: str, budget: int = DEFAULT_BUDGET_BYTES,
         address: str | None = None) -> Scan:
    """Profile every row within the budget, else a uniform sample; see the module doc."""
    pieces = plan(files, fmt, budget)
    work = min(budget, sum(f.size for f in files))
    one_pass = work <= ONE_PASS_BYTES and work == sum(f.size for f in files)
    table = merge_all(_compute(profile_pieces, pieces, work, address, fmt, one_pass))
    return Scan(table, pieces, fmt, len(files), sum(f.size for f in files), budget)


def key_hashes(found: Scan, columns: list[str], address: str | None = None
               ) -> dict[str, np.ndarray]:
    """Each header's value hashes over every row read, in the order of ``found.pieces``:
    kept from the profile when it kept them, else read again (only those columns)."""
    kept = found.table.key_hashes
    if kept is not None and all(c in kept for c in columns):
        return {c: kept[c] for c in columns}
    parts = _compute(column_hashes, found.pieces, found.total_bytes, address, found.fmt,
                     columns)
    return {c: np.concatenate([p[c] for p in parts]) for c in columns}
