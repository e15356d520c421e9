"""Split fractions drafted from the row count and the label's classes, not a fixed 80/10/10.

Training refuses a held-out split under ``training.config.DEFAULT_MIN_EVAL_EXAMPLES`` (20)
rows or missing a class that train has (``training.sanity``); a stratified split gives each
class its fractions within a row or two (``etl.write.writer``). So eval and test each get
enough rows for about ``HELD_OUT_ROWS`` examples and, for a class label, ``CLASS_ROWS`` of the
smallest class, up to ``MAX_SHARE`` each: a large table keeps 80/10/10, a 214-row table with a
9-row class gets 60/20/20. A table where 20% would leave eval or test under ``MIN_HELD_OUT``
rows (under 110 rows) may give each up to ``SMALL_MAX_SHARE`` (50/25/25 for 100 rows), so a
small table is not judged on a handful of rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BASE_SHARE = 0.1  # eval and test each, for a large table
MAX_SHARE = 0.2  # eval and test each at most, where that leaves them MIN_HELD_OUT rows
SMALL_MAX_SHARE = 0.25  # at most, where 20% would not: train keeps half however small
HELD_OUT_ROWS = 30  # wanted in eval and in test (training refuses fewer than 20)
MIN_HELD_OUT = 22  # eval and test each at least, where SMALL_MAX_SHARE allows
CLASS_ROWS = 2  # wanted of every class in eval and in test
MIN_ROWS = 100  # fewer rows: no held-out split can say much
MIN_CLASS = 5  # a class with fewer rows cannot reach train, eval and test reliably


@dataclass(frozen=True)
class Fractions:
    """The drafted shares and why."""

    held_out: float  # eval and test each
    why: str
    problem: str = ""  # set when the table is too small to evaluate soundly

    def split(self) -> dict[str, float]:
        train = round(1 - 2 * self.held_out, 2)
        return {"train": train, "eval": self.held_out, "test": self.held_out}


def draft_fractions(rows: int, classes: dict[str, int] | None) -> Fractions:
    """Shares for ``rows`` labelled rows; ``classes``: rows per class (None: regression)."""
    need = {"rows": HELD_OUT_ROWS / max(rows, 1)}
    smallest = min(classes.items(), key=lambda kv: kv[1]) if classes else None
    if smallest:
        need["classes"] = CLASS_ROWS / max(smallest[1], 1)
    share = max(BASE_SHARE, *need.values())
    cap = MAX_SHARE if rows * MAX_SHARE >= MIN_HELD_OUT else SMALL_MAX_SHARE
    share = min(cap, math.ceil(share * 20 - 1e-9) / 20)  # in steps of 5%
    shares = f"{1 - 2 * share:.0%}/{share:.0%}/{share:.0%}"
    if share == BASE_SHARE:
        why = f"{rows:,} rows: {shares} leaves eval and test at least {HELD_OUT_ROWS} rows each"
    else:
        why = (f"{rows:,} rows" + (f", smallest class {smallest[0]!r} with {smallest[1]}" if
                                   smallest else "") + f": {shares} so that eval and test each "
               f"get about {HELD_OUT_ROWS} rows" + (f" and {CLASS_ROWS} of every class" if
                                                    smallest else "") + " where the data allows")
    problems = []
    if rows < MIN_ROWS:
        problems.append(f"only {rows} labelled rows (fewer than {MIN_ROWS})")
    if smallest and smallest[1] < MIN_CLASS:
        problems.append(f"class {smallest[0]!r} has {smallest[1]} rows (fewer than {MIN_CLASS})")
    problem = ("too small to evaluate soundly: " + "; ".join(problems) + "; held-out metrics "
               "will be noisy or training may refuse the split (gather more rows, or merge "
               "rare classes)") if problems else ""
    return Fractions(round(share, 2), why, problem)
