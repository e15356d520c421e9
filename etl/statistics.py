"""Mergeable statistics: running moments of numeric columns, and a segment's split statistics
as a partial that merges with others' without the rows.

Moments (count, sum, mean, M2 -- the sum of squared deviations from the mean --, min, max) are
computed per part of the data and merged exactly with Chan et al.'s pairwise update, stable
where a sum of squares would lose the variance of values with a large mean; the split
statistics and the dataset-level validation metrics (``etl.validation.metrics``) both use them.

A split statistics partial holds, per split: the row count, label counts (a classification
label) or the label's moments (``label_moments``, a regression label), the moments of every
numeric column and the value counts of every categorical one. Partials merge exactly, so
merging the partials of days gives the whole window's mean and variance to float64
rounding, in any grouping and any order of days; nothing needs to read the rows again. This
is what lets a dataset version be composed from parts built on different nights, and a
compaction merge its inputs' statistics. A partial is a typed record (``StatisticsPartial``, a
``SplitPartial`` per split) that merges itself and reads and writes the JSON stored beside the
data it describes (a segment's ``statistics_partial``), key for key; a column's moments in it
stay JSON-able dicts (string keys, Python numbers), as ``moments_of`` gives them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from etl.jsonobject import JsonObject, key, mapping_of

EMPTY_MOMENTS: dict[str, Any] = {"count": 0, "sum": 0.0, "mean": 0.0, "m2": 0.0, "min": None,
                         "max": None}


def moments_of(values: pd.Series) -> dict[str, Any]:
    """The summary of one column's non-missing values (numbers, or text that parses)."""
    x = pd.to_numeric(values, errors="coerce").astype("float64").dropna()
    if x.empty:
        return dict(EMPTY_MOMENTS)
    mean = float(x.mean())
    return {"count": len(x), "sum": float(x.sum()), "mean": mean,
            "m2": float(((x - mean) ** 2).sum()), "min": float(x.min()), "max": float(x.max())}


def moments_of_frame(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """``moments_of`` for every (numeric) column at once: one pass of numpy over the block.

    A part with a few hundred rows (a day's segment) would otherwise pay pandas' per-call
    overhead for each column and each moment.
    """
    return moments_of_array(frame.to_numpy(dtype="float64", na_value=np.nan), list(frame.columns))


def moments_of_array(x: np.ndarray, columns: list[str]) -> dict[str, dict[str, Any]]:
    """``moments_of_frame`` of a float64 block (rows x ``columns``, NaN where missing)."""
    seen = ~np.isnan(x)
    count = seen.sum(axis=0)
    total = np.where(seen, x, 0.0).sum(axis=0)
    mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    m2 = (np.where(seen, x - mean, 0.0) ** 2).sum(axis=0)
    low = np.where(seen, x, np.inf).min(axis=0, initial=np.inf)
    high = np.where(seen, x, -np.inf).max(axis=0, initial=-np.inf)
    return {col: dict(EMPTY_MOMENTS) if not count[i] else
            {"count": int(count[i]), "sum": float(total[i]), "mean": float(mean[i]),
             "m2": float(m2[i]), "min": float(low[i]), "max": float(high[i])}
            for i, col in enumerate(columns)}


def merge_moments(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of both parts' values."""
    if not a["count"] or not b["count"]:
        return dict(b if b["count"] else a)
    n = a["count"] + b["count"]
    delta = b["mean"] - a["mean"]
    return {"count": n, "sum": a["sum"] + b["sum"], "mean": a["mean"] + delta * b["count"] / n,
            "m2": a["m2"] + b["m2"] + delta * delta * a["count"] * b["count"] / n,
            "min": min(a["min"], b["min"]), "max": max(a["max"], b["max"])}


def group_blocks(keys: np.ndarray, n: int) -> tuple[np.ndarray, list[slice]]:
    """(an order sorting rows by ``keys``, each key's slice of that order), keys in 0..n-1; a
    row keyed -1 belongs to no block. Lets a batch's partials be computed per group at once."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1)).tolist()
    return order, [slice(bounds[k], bounds[k + 1]) for k in range(n)]


def group_counts(values: pd.Series, keys: np.ndarray, n: int
                 ) -> tuple[pd.Index, list[tuple[np.ndarray, np.ndarray]]]:
    """Value counts of every group of rows in one pass: (the distinct present values, per key
    in 0..n-1 the positions of its values in them and their counts, most frequent first)."""
    codes, uniques = pd.factorize(values)
    width = max(len(uniques), 1)
    seen = (codes >= 0) & (keys >= 0)
    flat, counts = np.unique(keys[seen] * width + codes[seen], return_counts=True)
    group, code = np.divmod(flat, width)
    by = np.lexsort((code, -counts, group))
    group, code, counts = group[by], code[by], counts[by]
    bounds = np.searchsorted(group, np.arange(n + 1)).tolist()
    return uniques, [(code[lo:hi], counts[lo:hi]) for lo, hi in itertools.pairwise(bounds)]


# --- split statistics partials ---------------------------------------------------------------

Moments = Mapping[str, Any]  # {count, sum, mean, m2, min, max}: a column's, as moments_of gives


@dataclass(frozen=True, kw_only=True)
class SplitPartial(JsonObject):
    """One split's mergeable statistics: its rows, the label's counts (a classification label)
    or moments (a regression label), the moments of each numeric column, the value counts of
    each categorical one and the nulls a fill hid per feature (``None``: a partial from
    before null counts, whose nulls are unknown)."""

    rows: int = key(int, default=0)
    labels: Mapping[str, int] = key(dict, default={})
    numeric: Mapping[str, Moments] = key(dict, default={})
    vocab: Mapping[str, Mapping[str, int]] = key(dict, default={})
    label_moments: Moments | None = key(dict)
    nulls: Mapping[str, int] | None = key(dict)

    def merge(self, other: SplitPartial) -> SplitPartial:
        """The statistics of both parts' rows of this split."""
        x, y = self, other
        extra: dict[str, Any] = {}
        if x.nulls is not None and y.nulls is not None:  # a partial from before null counts:
            extra["nulls"] = _add_counts(x.nulls, y.nulls)  # unknown
        if x.label_moments is not None or y.label_moments is not None:
            extra["label_moments"] = merge_moments(x.label_moments or EMPTY_MOMENTS,
                                                   y.label_moments or EMPTY_MOMENTS)
        return SplitPartial.of(
            rows=x.rows + y.rows, labels=_add_counts(x.labels, y.labels),
            numeric={c: merge_moments(x.numeric[c], y.numeric[c])
                     if c in x.numeric and c in y.numeric
                     else x.numeric.get(c) or y.numeric[c]
                     for c in sorted(set(x.numeric) | set(y.numeric))},
            vocab={c: _add_counts(x.vocab.get(c, {}), y.vocab.get(c, {}))
                   for c in sorted(set(x.vocab) | set(y.vocab))},
            **extra)


_SPLITS = mapping_of(SplitPartial)


@dataclass(frozen=True)
class StatisticsPartial:
    """A segment's split statistics partial (``segment.json``'s ``statistics_partial``): a
    ``SplitPartial`` per split, keyed by the split's name. Its JSON is an object of splits,
    so it is no ``JsonObject`` of its own; its splits are, and it reads and writes them."""

    splits: Mapping[str, SplitPartial] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any, where: str, at: str = "") -> StatisticsPartial:
        """``obj``: the stored JSON (``where``: the file it is in, named by any error)."""
        return cls(_SPLITS.load(obj, where, at))

    def to_json(self) -> dict[str, Any]:
        return _SPLITS.dump(self.splits)

    def split(self, name: str) -> SplitPartial:
        """The split's statistics (empty when the partial has none of its rows)."""
        return self.splits.get(name) or SplitPartial()

    def merge(self, other: StatisticsPartial) -> StatisticsPartial:
        """One partial covering the rows of both."""
        out: dict[str, SplitPartial] = {}
        for name in sorted(set(self.splits) | set(other.splits)):
            x, y = self.splits.get(name), other.splits.get(name)
            out[name] = y if x is None else x if y is None else x.merge(y)
        return StatisticsPartial(out)

    @classmethod
    def merge_all(cls, parts: Iterable[StatisticsPartial]) -> StatisticsPartial:
        """Merge in a balanced tree, so rounding does not grow with the number of parts."""
        level = list(parts)
        if not level:
            return cls()
        while len(level) > 1:
            level = [level[i].merge(level[i + 1]) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        return level[0]


def partial(prepared: pd.DataFrame, split_of: pd.Series, splits: Sequence[str], label: str,
            numeric: Sequence[str], categorical: Sequence[str], label_summary: str = "counts",
            missing: tuple[str, Sequence[str]] | None = None) -> StatisticsPartial:
    """The partial of one frame of prepared rows, ``split_of`` naming each row's split: one
    sort and one count per column for all splits at once.

    ``label_summary``: ``counts`` per label value, or ``moments`` of a numeric label.
    ``missing``: (a bitmask column, the features of its bits): counts the nulls a fill hid,
    so drift sees a feature whose values vanished (``nulls`` per split).
    """
    key = np.asarray(pd.Categorical(split_of, categories=list(splits)).codes, dtype=np.int64)
    n_keys = len(splits)
    order, blocks = group_blocks(key, n_keys)
    numbers = _block_moments(prepared, list(numeric), order, blocks)
    vocab = {c: _counts(prepared[c], key, n_keys) for c in categorical}
    labels = _counts(prepared[label], key, n_keys) if label_summary == "counts" else None
    label_moments = (_block_moments(prepared, [label], order, blocks)
                     if label_summary == "moments" else None)
    nulls = _null_counts(prepared, key, n_keys, missing)
    part: dict[str, SplitPartial] = {}
    for k, split in enumerate(splits):
        extra: dict[str, Any] = {}
        if label_moments is not None:
            extra["label_moments"] = label_moments[k][label]
        if nulls is not None:
            extra["nulls"] = {c: int(n[k]) for c, n in nulls.items()}
        part[split] = SplitPartial.of(rows=blocks[k].stop - blocks[k].start,
                                      labels=labels[k] if labels is not None else {},
                                      numeric=numbers[k],
                                      vocab={c: vocab[c][k] for c in categorical}, **extra)
    return StatisticsPartial(part)


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
    return [moments_of_array(x[b], columns) for b in blocks]


def _counts(values: pd.Series, key: np.ndarray, n_keys: int) -> list[dict[str, int]]:
    """Per key, the counts of the present values (keyed by their text)."""
    uniques, per_key = group_counts(values, key, n_keys)
    names = [str(u) for u in uniques.tolist()]
    return [{names[c]: n for c, n in zip(code.tolist(), counts.tolist())}
            for code, counts in per_key]


def _add_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


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
    part = merged.split(on)
    vocabularies: dict[str, list[str]] = {}
    vocabulary_counts: dict[str, dict[str, int]] = {}
    stats: dict[str, Any] = {"computed_on": on, "num_examples": int(part.rows),
                             "numeric": {col: _moments(part.numeric.get(col))
                                         for col in numeric},
                             "vocabularies": vocabularies,
                             "vocabulary_counts": vocabulary_counts}
    if part.label_moments is not None:
        stats["label"] = _moments(part.label_moments)
    for col in categorical:
        ordered = sorted(part.vocab.get(col, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        vocabularies[col] = [k for k, _ in ordered]
        vocabulary_counts[col] = dict(ordered)
    stats["null_counts"] = _null_counts_of(part, numeric)
    labels = {_label_key(k): int(v) for k, v in part.labels.items()}
    stats["label_counts"] = {k: labels[k] for k in sorted(labels, key=_sort_key)}
    stats["split_counts"] = {s: int(merged.split(s).rows) for s in splits}
    return stats


def _null_counts_of(part: SplitPartial, numeric: Sequence[str]) -> dict[str, int]:
    """Missing values per feature of a split: those a fill hid (``nulls``), and a numeric
    column's rows without a value. A categorical absent here has an unknown count (partials
    built before null counts; a constant-filled numeric then reads 0)."""
    out = {c: int(part.rows) - int((part.numeric.get(c) or {}).get("count", 0))
           for c in numeric}
    out.update({c: int(n) for c, n in (part.nulls or {}).items()})
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

