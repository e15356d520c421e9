"""From a merged profile to what the draft declares: each column's identifier, type, nulls,
range and value set, the null tokens to read as nulls, and a key that holds on every row read.
"""

from __future__ import annotations

import itertools
import keyword
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from etl.authoring.profile import (
    ISO,
    MAX_SET,
    SKETCH_K,
    TIME_FORMATS,
    ColumnPartial,
    TablePartial,
    distinct_of,
)
from etl.spec.model import RESERVED_COLUMNS, check_name

MAX_KEY_COLUMNS = 3
MAX_KEY_CANDIDATES = 12  # combinations of up to 3 among these: 298 hash checks at most
PROBE_ROWS = 20_000  # random rows a combination must be unique on before all rows are checked
MIN_GROUPS = 20  # fewer ids than this cannot spread over train/eval/test a group at a time
# An entity's id: `id`, `patient_id`, `uuid`, `row_key` (any case) or camelCase `patientId`.
_ID_NAME = re.compile(r"(?i:(?:^|_)(?:id|uuid|guid|key)$|^id_)|[a-z0-9]I[dD]$")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier: combines column hashes


# Letters NFKD does not decompose into ASCII, spelled as their languages transliterate them.
_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe",
                          "Œ": "OE", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th", "ð": "d"})
# Soft keywords of every supported Python (3.12 adds ``type``), whatever runs the draft.
_SOFT_KEYWORDS = frozenset({"match", "case", "type", "_"})


def column_identifiers(headers: Sequence[str]) -> dict[str, str]:
    """Each source header's identifier: what every stage after the read names the column.

    Upstream exports name columns freely (``Ship Mode``, ``Sub-Category``, ``2nd``, ``Größe``,
    ``class``); features, Example keys and Keras inputs need identifiers. Lowercase ASCII
    snake_case (accents stripped), ``c_`` before a leading digit, ``column_<n>`` (1-based) for
    a name with nothing left, ``_`` after a Python keyword (a Keras input named ``class``
    breaks the SavedModel's signature) or a column the pipeline adds itself
    (``quarantine_reason``), and ``_2``, ``_3``... in header order for names that
    collide (``Price`` and ``price``), so the mapping is deterministic and one-to-one.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for n, header in enumerate(headers, start=1):
        if header in out:  # a repeated header names one column
            continue
        text = unicodedata.normalize("NFKD", str(header).translate(_LETTERS))
        ascii_text = text.encode("ascii", "ignore").decode()
        base = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_") or f"column_{n}"
        if base[0].isdigit():
            base = f"c_{base}"
        if keyword.iskeyword(base) or base in _SOFT_KEYWORDS or base in RESERVED_COLUMNS:
            base = f"{base}_"
        name, i = base, 1
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        out[header] = check_name(name, f"column {header!r}")
        taken.add(name)
    return out


@dataclass(frozen=True)
class ColumnProfile:
    """One column over every row read, with the chosen null tokens counted as nulls."""

    name: str  # the identifier the spec declares
    source: str  # the header as the file has it
    type: str  # a spec column type: int64, float64, timestamp or string
    rows: int
    nulls: int
    distinct: int
    low: float | None = None  # numeric min / max
    high: float | None = None
    median: float | None = None
    values: tuple[str, ...] = ()  # every value, when there are at most MAX_SET
    counts: dict[str, int] = field(default_factory=dict)  # value counts (up to the cap)
    time_format: str | None = None  # a timestamp's format when it is not ISO 8601
    tokens: dict[str, int] = field(default_factory=dict)  # null tokens read as nulls here
    misfiled: int | None = None  # timestamps outside their file's partition
    period: str | None = None  # a timestamp's: "hour" (times of day), "day", or "month" (1sts)
    exact: bool = True  # distinct counted exactly (else the sketch's estimate, about 2%)

    @property
    def numeric(self) -> bool:
        return self.type in ("int64", "float64")

    @property
    def unique(self) -> bool:
        """Every value distinct (an estimate within its error counts: an id, not a category)."""
        return self.nulls == 0 and self.distinct >= self.rows * (1 if self.exact else 0.95)


def _type_of(p: ColumnPartial) -> tuple[str, str | None]:
    """The narrowest spec type every value but null tokens parses as, and its time format."""
    values = p.rows - p.nulls - sum(p.tokens.values())
    if values <= 0:
        return "string", None
    if p.numbers == values:
        return ("int64" if p.ints == values else "float64"), None
    for fmt in (ISO, *TIME_FORMATS):
        if p.times.get(fmt) == values:
            return "timestamp", fmt or None
    return "string", None


def null_tokens(table: TablePartial) -> set[str]:
    """Spellings to read as null: tokens in columns whose other values are all numbers or
    all timestamps (``nil`` among readings); a token in a text column is a category."""
    found: set[str] = set()
    for p in table.columns.values():
        if p.tokens and _type_of(p)[0] != "string":
            found |= set(p.tokens)
    return found


def column_profiles(table: TablePartial, names: dict[str, str], tokens: set[str]
                    ) -> dict[str, ColumnProfile]:
    """Identifier -> profile of each column, reading ``tokens`` as nulls everywhere (the spec's
    read.null_values apply to the whole source)."""
    out = {}
    for header, p in table.columns.items():
        kind, fmt = _type_of(p)
        hit = {t: n for t, n in p.tokens.items() if t in tokens}
        counts = Counter({v: n for v, n in (p.values or {}).items() if v not in tokens})
        distinct = len(counts) if p.values is not None else distinct_of(p) - len(hit)
        sample = p.sample[1]
        out[names[header]] = ColumnProfile(
            name=names[header], source=header, type=kind, rows=p.rows,
            nulls=p.nulls + sum(hit.values()), distinct=distinct, low=p.low if kind != "string"
            else None, high=p.high if kind != "string" else None,
            median=float(np.median(sample)) if len(sample) else None,
            values=tuple(sorted(counts)) if kind == "string" and p.values is not None
            and distinct <= MAX_SET else (),
            counts=dict(counts), time_format=fmt, tokens=hit,
            misfiled=p.misfiled.get(fmt or ISO) if kind == "timestamp" else None,
            period=_period(p, fmt or ISO) if kind == "timestamp" else None,
            exact=p.values is not None or len(p.sketch) < SKETCH_K)
    return out


def _period(p: ColumnPartial, fmt: str) -> str:
    """The finest period a timestamp's values show: ``hour`` where any has a time of day
    other than midnight, ``day`` where any falls on another day than a month's 1st, else
    ``month`` (monthly or coarser data)."""
    if p.clock.get(fmt):
        return "hour"
    return "day" if p.mid_month.get(fmt) else "month"


def key_candidates(profiles: dict[str, ColumnProfile], rows: int) -> list[str]:
    """Columns a key may use, preferred first: no nulls, not a float (a measurement that
    happens to be unique makes a poor identity), time before text before integers."""
    order = {"timestamp": 0, "string": 1, "int64": 2}
    ok = [p for p in profiles.values()
          if p.nulls == 0 and p.type in order and (p.distinct > 1 or p.unique)]
    ok.sort(key=lambda p: (not p.unique, order[p.type], list(profiles).index(p.name)))
    return [p.name for p in ok][:MAX_KEY_CANDIDATES] if rows else []


def find_key(hashes: dict[str, np.ndarray], profiles: dict[str, ColumnProfile]
             ) -> tuple[str, ...] | None:
    """The first combination (fewest columns, preferred ones first) whose values are unique on
    every row read: ``hashes`` holds each candidate's 64-bit value hash per row. A hash
    collision can only hide a key, never claim a false one."""
    names = list(hashes)
    rows = len(next(iter(hashes.values()))) if hashes else 0
    probe = np.random.default_rng(0).choice(rows, min(rows, PROBE_ROWS), replace=False)
    for size in range(1, MAX_KEY_COLUMNS + 1):
        for combo in itertools.combinations(names, size):
            if np.prod([float(profiles[c].distinct) for c in combo]) < rows * 0.9:
                continue  # too few value combinations for every row to have its own
            if not _unique(hashes, combo, probe) or not _unique(hashes, combo, None):
                continue  # most combinations repeat within a few thousand rows already
            return combo
    return None


def _unique(hashes: dict[str, np.ndarray], combo: tuple[str, ...], rows: np.ndarray | None
            ) -> bool:
    """Whether ``combo``'s values differ on every row (of ``rows``, or all)."""
    mixed = hashes[combo[0]] if rows is None else hashes[combo[0]][rows]
    for col in combo[1:]:
        mixed = mixed * _MIX ^ (hashes[col] if rows is None else hashes[col][rows])
    return len(np.unique(mixed)) == len(mixed)


def group_candidates(profiles: dict[str, ColumnProfile], skip: set[str]) -> list[str]:
    """Columns that look like an entity's id repeated over its rows (a patient's visits): an
    id-like name, integer or text, no nulls, not unique, at least ``MIN_GROUPS`` values."""
    return [p.name for p in profiles.values()
            if p.name not in skip and _ID_NAME.search(p.name) and p.type in ("int64", "string")
            and p.nulls == 0 and not p.unique and p.distinct >= MIN_GROUPS]
