"""Split statistics as mergeable partials: computed per segment, merged without the rows.

A partial holds, per split: the row count, label counts (a classification label) or the
label's count/mean/M2/min/max (``label_moments``, a regression label), and per numeric column
the count, mean, M2 (sum of squared deviations from the mean), min and max (``etl.moments``),
and per categorical column the value counts. Partials merge exactly (Chan et al.'s pairwise
update), so merging the partials of
days gives the whole window's mean and variance to float64 rounding, in any grouping and any
order of days; nothing needs to read the rows again. This is what lets a dataset version be
composed from parts built on different nights.

A partial is JSON-able (string keys, Python numbers), so it can be stored beside the data it
describes and merged later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from etl import moments
from etl.transform.split import SPLIT_COL

StatisticsPartial = dict[str, Any]
"""{split: {"rows", "labels": {label: n}, ["label_moments": {count, mean, m2, min, max}],
"numeric": {col: {count, mean, m2, min, max}}, "vocab": {col: {value: n}}}}"""


def partial(prepared: pd.DataFrame, splits: Sequence[str], label: str,
            numeric: Sequence[str], categorical: Sequence[str],
            label_summary: str = "counts") -> StatisticsPartial:
    """The partial of one frame of prepared rows (``SPLIT_COL`` names each row's split).

    ``label_summary``: ``counts`` per label value, or ``moments`` of a numeric label.
    """
    return partials(prepared, np.zeros(len(prepared), dtype=np.int64), 1, splits, label,
                    numeric, categorical, label_summary)[0]


def partials(prepared: pd.DataFrame, groups: np.ndarray, n_groups: int,
             splits: Sequence[str], label: str, numeric: Sequence[str],
             categorical: Sequence[str], label_summary: str = "counts",
             missing: tuple[str, Sequence[str]] | None = None) -> list[StatisticsPartial]:
    """``partial`` of each group of rows at once (``groups[i]``, in ``0..n_groups-1``, is row
    i's group): one sort and one count per column for a whole batch of segments, instead of
    pandas' per-call costs paid per segment, split and column.

    ``missing``: (a bitmask column, the features of its bits): counts the nulls a fill hid,
    so drift sees a feature whose values vanished (``nulls`` per split).
    """
    n_splits = len(splits)
    split_code = pd.Categorical(prepared[SPLIT_COL], categories=list(splits)).codes
    key = np.where(split_code >= 0, np.asarray(groups, dtype=np.int64) * n_splits + split_code,
                   -1)
    n_keys = n_groups * n_splits
    order, blocks = moments.group_blocks(key, n_keys)
    numbers = _block_moments(prepared, list(numeric), order, blocks)
    vocab = {c: _counts(prepared[c], key, n_keys) for c in categorical}
    labels = _counts(prepared[label], key, n_keys) if label_summary == "counts" else None
    label_moments = (_block_moments(prepared, [label], order, blocks)
                     if label_summary == "moments" else None)
    nulls = _null_counts(prepared, key, n_keys, missing)
    out: list[StatisticsPartial] = []
    for g in range(n_groups):
        part: StatisticsPartial = {}
        for s, split in enumerate(splits):
            k = g * n_splits + s
            part[split] = {"rows": blocks[k].stop - blocks[k].start,
                           "labels": labels[k] if labels is not None else {},
                           "numeric": numbers[k], "vocab": {c: vocab[c][k] for c in categorical}}
            if label_moments is not None:
                part[split]["label_moments"] = label_moments[k][label]
            if nulls is not None:
                part[split]["nulls"] = {c: int(n[k]) for c, n in nulls.items()}
        out.append(part)
    return out


def _null_counts(prepared: pd.DataFrame, key: np.ndarray, n_keys: int,
                 missing: tuple[str, Sequence[str]] | None) -> dict[str, np.ndarray] | None:
    """Per feature of the bitmask, its nulls per key (None: no bitmask given)."""
    if missing is None or missing[0] not in prepared:
        return None
    bits = prepared[missing[0]].to_numpy(dtype=np.int64)
    seen = key >= 0
    return {c: np.bincount(key[seen], weights=(bits[seen] >> i) & 1, minlength=n_keys)
            for i, c in enumerate(missing[1])}


def _block_moments(frame: pd.DataFrame, columns: list[str], order: np.ndarray,
                   blocks: list[slice]) -> list[dict[str, dict[str, Any]]]:
    if not columns:
        return [{} for _ in blocks]
    x = frame[columns].to_numpy(dtype="float64", na_value=np.nan)[order]
    return [moments.of_array(x[b], columns) for b in blocks]


def _counts(values: pd.Series, key: np.ndarray, n_keys: int) -> list[dict[str, int]]:
    """Per key, the counts of the present values (keyed by their text)."""
    uniques, per_key = moments.group_counts(values, key, n_keys)
    names = [str(u) for u in uniques.tolist()]
    return [{names[c]: n for c, n in zip(code.tolist(), counts.tolist())}
            for code, counts in per_key]


def _add_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def merge(a: StatisticsPartial, b: StatisticsPartial) -> StatisticsPartial:
    """One partial covering the rows of both."""
    out: StatisticsPartial = {}
    for split in sorted(set(a) | set(b)):
        x, y = a.get(split), b.get(split)
        if x is None or y is None:
            out[split] = x if y is None else y
            continue
        out[split] = {
            "rows": x["rows"] + y["rows"],
            "labels": _add_counts(x["labels"], y["labels"]),
            "numeric": {c: moments.merge(x["numeric"][c], y["numeric"][c])
                        if c in x["numeric"] and c in y["numeric"]
                        else x["numeric"].get(c) or y["numeric"][c]
                        for c in sorted(set(x["numeric"]) | set(y["numeric"]))},
            "vocab": {c: _add_counts(x["vocab"].get(c, {}), y["vocab"].get(c, {}))
                      for c in sorted(set(x["vocab"]) | set(y["vocab"]))},
        }
        if "nulls" in x and "nulls" in y:  # a partial from before null counts: unknown
            out[split]["nulls"] = _add_counts(x["nulls"], y["nulls"])
        if "label_moments" in x or "label_moments" in y:
            out[split]["label_moments"] = moments.merge(x.get("label_moments", moments.EMPTY),
                                                        y.get("label_moments", moments.EMPTY))
    return out


def merge_all(parts: Iterable[StatisticsPartial]) -> StatisticsPartial:
    """Merge in a balanced tree, so rounding does not grow with the number of parts."""
    level = list(parts)
    if not level:
        return {}
    while len(level) > 1:
        level = [merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def _label_key(value: str) -> str:
    try:
        return str(int(float(value)))
    except ValueError:
        return value


def finalize(merged: StatisticsPartial, splits: Sequence[str], numeric: Sequence[str],
             categorical: Sequence[str], on: str = "train") -> dict[str, Any]:
    """The manifest's ``statistics``: numeric and vocabularies of split ``on``, all split sizes.

    Vocabularies are ordered by count (descending), then value, so the model's lookup tables
    do not depend on how the rows were grouped.
    """
    part = merged.get(on) or {"rows": 0, "labels": {}, "numeric": {}, "vocab": {}}
    stats: dict[str, Any] = {"computed_on": on, "num_examples": int(part["rows"]),
                             "numeric": {}, "vocabularies": {}, "vocabulary_counts": {}}
    for col in numeric:
        stats["numeric"][col] = _moments(part["numeric"].get(col))
    if "label_moments" in part:
        stats["label"] = _moments(part["label_moments"])
    for col in categorical:
        ordered = sorted(part["vocab"].get(col, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        stats["vocabularies"][col] = [k for k, _ in ordered]
        stats["vocabulary_counts"][col] = dict(ordered)
    stats["null_counts"] = _null_counts_of(part, numeric)
    labels = {_label_key(k): int(v) for k, v in part["labels"].items()}
    stats["label_counts"] = {k: labels[k] for k in sorted(labels, key=_sort_key)}
    stats["split_counts"] = {s: int((merged.get(s) or {"rows": 0})["rows"]) for s in splits}
    return stats


def _null_counts_of(part: Mapping[str, Any], numeric: Sequence[str]) -> dict[str, int]:
    """Missing values per feature of a split: those a fill hid (``nulls``), and a numeric
    column's rows without a value. A categorical absent here has an unknown count (partials
    built before null counts; a constant-filled numeric then reads 0)."""
    out = {c: int(part["rows"]) - int((part["numeric"].get(c) or {}).get("count", 0))
           for c in numeric}
    out.update({c: int(n) for c, n in (part.get("nulls") or {}).items()})
    return dict(sorted(out.items()))


def _moments(p: Mapping[str, Any] | None) -> dict[str, Any]:
    """mean/var (population)/min/max/count of a merged numeric partial (zeros when empty)."""
    n = int((p or {}).get("count", 0))
    return {"mean": float(p["mean"]) if n else 0.0, "var": float(p["m2"]) / n if n else 0.0,
            "min": float(p["min"]) if n else 0.0, "max": float(p["max"]) if n else 0.0,
            "count": n}


def _sort_key(value: str) -> tuple[int, Any]:
    try:
        return (0, int(value))
    except ValueError:
        return (1, value)

