"""The label's task on the ETL side: one object per task, chosen once from ``spec.label.task``.

Each task says how the rows' label is computed from its (typed) source column, how the
mergeable statistics summarize it (class counts or moments), how the classes are resolved
and checked once the whole split is known, and how the value is stored in the Example. The
transform calls these and never tests the task itself; a new task is one entry in ``TASKS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from etl.errors import ValidationFailed
from etl.spec.model import BINARY, MULTICLASS, REGRESSION, Label

_OPS = {"gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
        "eq": np.equal}
COUNTS, MOMENTS = "counts", "moments"
_SHOWN = 5  # unknown class values named in a failure


@dataclass(frozen=True)
class LabelTask:
    """The ETL stage functions of one label task.

    encode(label, typed source, source column type) -> the prepared label column;
    summary: how ``etl.transform.stats`` summarizes it (``counts`` or ``moments``);
    resolve(label, per-split label counts, where) -> the manifest's ``schema.label`` (the
    classes, checked against every split; raises ValidationFailed naming unknown values);
    store(prepared label, schema.label) -> the Example column;
    inherit(label, previous version's schema.label or None) -> the label this version uses
    (classes not listed in the spec stay those of the first version that took them);
    fixed(label) -> whether the stored values are known before any data is read (False for
    classes still to be taken from the train split).
    """

    name: str
    encode: Callable[[Label, pd.Series, str], pd.Series]
    summary: str
    resolve: Callable[[Label, dict[str, dict[str, int]], str], dict[str, Any]]
    store: Callable[[pd.Series, dict[str, Any]], pd.Series]
    inherit: Callable[[Label, dict[str, Any] | None], Label] = lambda label, previous: label
    fixed: Callable[[Label], bool] = lambda label: True


def _binary(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    del source_type
    values = _OPS[label.op](source.to_numpy(), label.value).astype("int64")
    return pd.Series(values, index=source.index)


def _class_text(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    """Class values as text: an int64 source gives "3", not the float parse's "3.0"."""
    del label
    if source_type == "int64":
        return source.astype("Int64").astype("str")
    return source.astype("str")


def _as_float(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    del label, source_type
    return source.astype("float64")


def _fixed_classes(label: Label, counts: dict[str, dict[str, int]], where: str) -> dict[str, Any]:
    del counts, where
    return label.schema()


def _resolve_classes(label: Label, counts: dict[str, dict[str, int]],
                     where: str) -> dict[str, Any]:
    """The spec's classes, or the train split's vocabulary (sorted); every value must be one."""
    names = list(label.names) or sorted(counts.get("train", {}))
    known = set(names)
    unknown: dict[str, list[str]] = {}
    for split, seen in counts.items():
        for value in sorted(set(seen) - known):
            unknown.setdefault(value, []).append(f"{split}: {seen[value]}")
    if unknown:
        origin = (label.names_from or f"{where}.label.classes {names}" if label.names
                  else f"the train split's classes {names} ({where}.label lists none)")
        shown = "; ".join(f"{v!r} ({', '.join(n)} rows)" for v, n in list(unknown.items())[:_SHOWN])
        raise ValidationFailed(
            f"label {label.name!r} (column {label.source!r}): {len(unknown)} value(s) not in "
            f"{origin}: {shown}. Nothing was published.",
            {"unknown_classes": sorted(unknown)})
    if len(names) < 2:
        raise ValidationFailed(f"label {label.name!r}: the train split has {len(names)} "
                               f"class(es) {names}; a classifier needs at least 2")
    return {**label.schema(), "classes": len(names), "names": names}


def _inherit_classes(label: Label, previous: dict[str, Any] | None) -> Label:
    """Classes the spec does not list are fixed by the newest published version, so a class
    that appears later fails the run instead of silently renumbering the classes."""
    if label.names or not previous or not previous.get("names"):
        return label
    names = tuple(str(n) for n in previous["names"])
    return replace(label, names=names, classes=len(names),
                   names_from=f"the classes {list(names)} of the published version "
                              f"{previous.get('version', '?')} (the spec lists none)")


def _store_int(values: pd.Series, schema: dict[str, Any]) -> pd.Series:
    del schema
    return values.astype("int64")


def _store_index(values: pd.Series, schema: dict[str, Any]) -> pd.Series:
    index = {name: i for i, name in enumerate(schema["names"])}
    return values.map(index).astype("int64")


def _store_float(values: pd.Series, schema: dict[str, Any]) -> pd.Series:
    del schema
    return values.astype("float32")


TASKS: dict[str, LabelTask] = {
    BINARY: LabelTask(BINARY, _binary, COUNTS, _fixed_classes, _store_int),
    MULTICLASS: LabelTask(MULTICLASS, _class_text, COUNTS, _resolve_classes, _store_index,
                          _inherit_classes, lambda label: bool(label.names)),
    REGRESSION: LabelTask(REGRESSION, _as_float, MOMENTS, _fixed_classes, _store_float),
}


def label_task(label: Label) -> LabelTask:
    """The task object of a spec's label (the spec loader has checked the name)."""
    return TASKS[label.task]
