"""What raw columns hold: partial profiles of pieces of the data, merged into one.

Input is what extraction hands over (every value a string exactly as the file holds it, read
by ``etl.kinds.tabular.read``), and values are parsed with validation's own parser
(``etl.validation.suite.parse_column``), so a type, range or null drafted here is what the
run will find. Each Dask task profiles some files (or blocks of them) into a ``TablePartial``;
partials merge in any order (counts add, ranges widen, value counts add up to a cap, distinct
counts beyond it come from a k-minimum-values sketch), so every row can be profiled in
parallel and the result does not depend on how the rows were cut.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from etl.kinds.tabular.read import parse_timestamps
from etl.validation.suite import parse_column

MAX_SET = 50  # a string column with at most this many values gets a value-set expectation
MAX_VOCAB = 1000  # more distinct strings than this: an id or free text, not a category
VALUE_CAP = MAX_VOCAB + 1  # exact value counts kept up to this many distinct values
SKETCH_K = 2048  # k of the k-minimum-values distinct sketch (about 2% error beyond the cap)
RESERVOIR = 4096  # numeric values kept (uniformly, by random priority) for the median
PROBE = 64  # distinct values a parse is tried on before the whole column
_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier: combines column hashes
_NULL_HASH = np.uint64(0x5A17_0F_D1CE_0000)
# Spellings of "no value" found in numeric exports (matched stripped, case-insensitively; ""
# also catches blanks a CSV reader keeps and JSON's ""). Only these: an arbitrary word in a
# numeric column is a data error for validation to report.
NULL_TOKENS = ("nil", "n/a", "na", "-", "--", "?", "missing", "null", "none", "nan", ".", "")
_INT = r"[+-]?\d{1,18}"
_ISO_DATE = r"\d{4}-\d{2}-\d{2}.*"
ISO = ""  # the time format key of ISO 8601 text
# Common non-ISO date formats, tried in order on text columns (first that parses every value).
# The months last: R writes a year-month as "1939 Jan" (tsibble's yearmonth; fpp3's monthly
# tables); drafted as a 970-value category, its order and trend were lost (drawn gauntlet,
# fpp3/us_employment at 0.17x the reference).
TIME_FORMATS = ("%Y/%m/%d", "%Y/%m/%d %H:%M:%S", "%d/%m/%Y", "%m/%d/%Y", "%Y%m%d", "%d.%m.%Y",
                "%Y-%m-%d %H:%M", "%Y %b", "%b %Y", "%Y-%m")


@dataclass
class ColumnPartial:
    """One column of some rows; every field merges by ``merge_columns``."""

    rows: int = 0
    nulls: int = 0
    tokens: Counter = field(default_factory=Counter)  # null-token spellings -> count
    numbers: int = 0  # values (tokens aside) that parse as numbers, the way validation does
    ints: int = 0  # of those, written as integers
    low: float | None = None
    high: float | None = None
    times: Counter = field(default_factory=Counter)  # time format (ISO = "") -> values parsed
    misfiled: Counter = field(default_factory=Counter)  # time format -> outside their file
    clock: Counter = field(default_factory=Counter)  # time format -> values not at midnight
    mid_month: Counter = field(default_factory=Counter)  # time format -> not on a 1st (daily)
    values: Counter | None = field(default_factory=Counter)  # None: more than VALUE_CAP
    sketch: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    sample: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.empty(0), np.empty(0)))  # (priorities, numbers)


@dataclass
class TablePartial:
    """Some rows of a source: per-column partials, row hashes (duplicates), where read."""

    rows: int = 0
    columns: dict[str, ColumnPartial] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)  # column -> a file without it
    files: set[str] = field(default_factory=set)
    empty: set[str] = field(default_factory=set)  # files (or blocks) with no data rows
    row_hashes: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    # each possible key column's value hashes per row (no nulls, not fractional), kept when
    # the whole source is small enough that a second pass for the key would cost more
    key_hashes: dict[str, np.ndarray] | None = None


@dataclass(frozen=True)
class Origin:
    """Where the rows of a profiled frame came from: one entry per file (or block), in order."""

    uris: tuple[str, ...]
    rows: tuple[int, ...]
    periods: tuple[tuple[datetime, datetime] | None, ...]  # each file's [start, end)

    @classmethod
    def one(cls, uri: str, rows: int, period: tuple[datetime, datetime] | None = None
            ) -> Origin:
        return cls((uri,), (rows,), (period,))

    def bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each row's period start and end (naive UTC), or None when unpartitioned."""
        if any(p is None for p in self.periods):
            return None
        lo, hi = (np.array([p[i] for p in self.periods], dtype="datetime64[ns]") for i in (0, 1))
        return np.repeat(lo, self.rows), np.repeat(hi, self.rows)


def profile_frame(frame: pd.DataFrame, origin: Origin, seed: int, keep_hashes: bool = False
                  ) -> TablePartial:
    """The partial of some rows read (string columns), one or many files concatenated: a frame
    per small file would cost more than its rows (the ETL's reader batches them too)."""
    rng = np.random.default_rng(seed)
    bounds = origin.bounds()
    columns, hashes, keys = {}, np.zeros(len(frame), np.uint64), {}
    for col in frame.columns:
        columns[col], row_hash = _column(frame[col], bounds, rng)
        hashes = hashes * _MIX ^ row_hash
        p = columns[col]
        if keep_hashes and not p.nulls and not p.tokens and p.ints == p.numbers:
            keys[col] = row_hash
    return TablePartial(rows=len(frame), files=set(origin.uris), row_hashes=hashes,
                        key_hashes=keys if keep_hashes else None,
                        empty={u for u, n in zip(origin.uris, origin.rows, strict=True) if not n},
                        columns=columns)


def value_hashes(s: pd.Series) -> np.ndarray:
    """Each row's 64-bit hash of its value (nulls one constant): hashed once per distinct value,
    the same for a value wherever it is read, so hashes of pieces compare."""
    codes, uniques = pd.factorize(s)
    return np.append(_hash(uniques), _NULL_HASH)[codes]


def _hash(uniques: Any) -> np.ndarray:
    return pd.util.hash_array(np.asarray(uniques, dtype=object), categorize=False)


def _column(s: pd.Series, bounds: tuple[np.ndarray, np.ndarray] | None,
            rng: np.random.Generator) -> tuple[ColumnPartial, np.ndarray]:
    """A column's partial and its rows' value hashes. Every parse runs once per distinct value
    (weighted by its count): the same answer as per row, at a fraction of the cost."""
    codes, uniques = pd.factorize(s)
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    uvals = pd.Series(uniques, dtype=s.dtype)
    token = uvals.str.strip().str.lower().isin(NULL_TOKENS).to_numpy(bool)
    out = ColumnPartial(rows=len(s), nulls=int((codes < 0).sum()),
                        tokens=Counter({str(v): int(n) for v, n in
                                        zip(uvals[token], counts[token], strict=True)}))
    vals, weights = uvals[~token].reset_index(drop=True), counts[~token]
    keep = np.flatnonzero(~token)
    where = np.full(len(uniques) + 1, -1)  # a unique's position among vals; nulls -> -1
    where[keep] = np.arange(len(keep))
    at = where[codes]  # each row's value among vals, -1 for a null or a token
    number = _numbers(vals, weights, out)
    if len(vals) and out.numbers < weights.sum():
        _times(vals, weights, (at, bounds) if bounds else None, out)
    out.values = Counter(dict(zip(uvals.tolist(), counts.tolist(), strict=True))) \
        if len(uvals) <= VALUE_CAP else None
    hashes = _hash(uniques)
    out.sketch = _sketch(hashes)
    if number is not None:  # numeric rows' values, by a random priority (the median)
        values = number[at[at >= 0]]
        ok = ~np.isnan(values)
        out.sample = _keep_lowest((rng.random(int(ok.sum())), values[ok]))
    return out, np.append(hashes, _NULL_HASH)[codes]


def _numbers(vals: pd.Series, weights: np.ndarray, out: ColumnPartial) -> np.ndarray | None:
    """Count the values that parse as numbers as validation parses them (``parse_column``);
    a column whose first distinct values do not is not parsed whole."""
    if not len(vals):
        return None
    head = parse_column(vals.iloc[:PROBE], "float")
    if head is None or head[1].any():
        return None
    parsed = parse_column(vals, "float")[0].to_numpy("float64")
    ok = ~np.isnan(parsed)
    out.numbers = int(weights[ok].sum())
    if out.numbers:
        out.ints = int(weights[ok & vals.str.fullmatch(_INT).to_numpy(bool)].sum())
        finite = parsed[ok & np.isfinite(parsed)]  # "inf" parses, but bounds no range
        if len(finite):
            out.low, out.high = float(finite.min()), float(finite.max())
    return parsed


def _times(vals: pd.Series, weights: np.ndarray,
           rows: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None,
           out: ColumnPartial) -> None:
    """Values parsed as ISO 8601 (as validation parses them) or by each of TIME_FORMATS (as
    the reader parses a declared format), and those outside their file's period. A format
    that fails on the first distinct values is not tried on the rest (counted 0)."""
    if not vals.str.contains(r"\d", regex=True).all():
        return
    total = int(weights.sum())
    formats = [ISO] if vals.str.fullmatch(_ISO_DATE).all() else []
    for fmt in formats + list(TIME_FORMATS):
        if fmt != ISO and out.times.get(ISO) == total:
            break  # ISO decides first: other formats cannot change the type
        if _time_parse(vals.iloc[:PROBE], fmt).isna().any():
            continue
        parsed = _time_parse(vals, fmt)
        ok = parsed.notna().to_numpy(bool)
        out.times[fmt] = int(weights[ok].sum())
        stamps = parsed[ok]
        out.clock[fmt] += int(weights[ok][(stamps != stamps.dt.floor("D")).to_numpy()].sum())
        out.mid_month[fmt] += int(weights[ok][(stamps.dt.day != 1).to_numpy()].sum())
        if rows is not None and ok.all():
            at, (lo, hi) = rows
            present = at >= 0
            stamps = parsed.dt.tz_convert(None).to_numpy("datetime64[ns]")[at[present]]
            outside = (stamps < lo[present]) | (stamps >= hi[present])
            out.misfiled[fmt] = int(outside.sum())


def _time_parse(vals: pd.Series, fmt: str) -> pd.Series:
    if fmt == ISO:
        got = parse_column(vals, "timestamp")
        return got[0] if got else pd.Series(pd.NaT, index=vals.index, dtype="datetime64[us, UTC]")
    return parse_timestamps(vals, fmt)


def _sketch(hashes: np.ndarray) -> np.ndarray:
    """The SKETCH_K smallest of distinct hashes, sorted."""
    if len(hashes) > SKETCH_K:
        hashes = np.partition(hashes, SKETCH_K - 1)[:SKETCH_K]
    return np.sort(hashes)


def _keep_lowest(sample: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    prio, values = sample
    if len(prio) <= RESERVOIR:
        return prio, values
    keep = np.argpartition(prio, RESERVOIR)[:RESERVOIR]
    return prio[keep], values[keep]


def merge_columns(a: ColumnPartial, b: ColumnPartial) -> ColumnPartial:
    """One column's partials of two sets of rows, as if profiled together."""
    values = None if a.values is None or b.values is None else a.values + b.values
    return ColumnPartial(
        rows=a.rows + b.rows, nulls=a.nulls + b.nulls, tokens=a.tokens + b.tokens,
        numbers=a.numbers + b.numbers, ints=a.ints + b.ints,
        low=_pick(min, a.low, b.low), high=_pick(max, a.high, b.high),
        times=_add(a.times, b.times), misfiled=_add(a.misfiled, b.misfiled),
        clock=_add(a.clock, b.clock), mid_month=_add(a.mid_month, b.mid_month),
        values=values if values is None or len(values) <= VALUE_CAP else None,
        sketch=_sketch(np.unique(np.concatenate([a.sketch, b.sketch]))),
        sample=_keep_lowest((np.concatenate([a.sample[0], b.sample[0]]),
                             np.concatenate([a.sample[1], b.sample[1]]))))


def _add(a: Counter, b: Counter) -> Counter:
    """Counts summed, zeros kept (``Counter.__add__`` drops them: 0 misfiled is an answer)."""
    out = Counter(a)
    out.update(b)
    return out


def _pick(fn, x: float | None, y: float | None) -> float | None:
    return y if x is None else x if y is None else fn(x, y)


def merge(a: TablePartial, b: TablePartial) -> TablePartial:
    """Two tables' partials; a column missing from some file is remembered with that file."""
    absent = {**a.absent, **b.absent}
    for mine, theirs, where in ((a, b, b), (b, a, a)):
        for col in mine.columns:
            if col not in theirs.columns and where.files:
                absent.setdefault(col, min(where.files))
    columns = {c: merge_columns(a.columns.get(c, ColumnPartial()),
                                b.columns.get(c, ColumnPartial()))
               for c in dict.fromkeys([*a.columns, *b.columns])}
    return TablePartial(rows=a.rows + b.rows, columns=columns, absent=absent,
                        files=a.files | b.files, empty=a.empty | b.empty,
                        row_hashes=np.concatenate([a.row_hashes, b.row_hashes]),
                        key_hashes=_merge_keys(a.key_hashes, b.key_hashes))


def _merge_keys(a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray] | None
                ) -> dict[str, np.ndarray] | None:
    """Columns hashed on both sides, concatenated in row order (a column with a null on one
    side can be no key)."""
    if a is None or b is None:
        return None
    return {c: np.concatenate([a[c], b[c]]) for c in a if c in b}


def merge_all(parts: list[TablePartial]) -> TablePartial:
    """Every partial merged, in order (the first file's column order wins)."""
    out = TablePartial()
    for part in parts:
        out = merge(out, part) if out.files else part
    return out


def distinct_of(p: ColumnPartial) -> int:
    """Exact distinct values up to the cap, else the sketch's estimate."""
    if p.values is not None:
        return len(p.values)
    if len(p.sketch) < SKETCH_K:
        return len(p.sketch)
    return int((SKETCH_K - 1) * 2.0**64 / (float(p.sketch[SKETCH_K - 1]) + 1))
