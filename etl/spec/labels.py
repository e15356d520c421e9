"""A tabular spec's label: the ``label`` block, one parser per task, and what each task
does in the ETL -- both chosen once by ``task``.

A task's parser checks only the fields that task has (a regression label has no ``op``; a
binary one no ``classes``), so a field set for the wrong task fails as an unknown field
naming the file and the dotted path, before any data is touched.

The task object (``label_task``) says how the rows' label is computed from its (typed) source
column, how the mergeable statistics summarize it (class counts or moments), how the classes
are resolved and checked once the whole split is known, and how the value is stored in the
Example. The transform calls these and never tests the task itself; a new task is one entry
in ``TASKS`` and one in ``_PARSERS``. No pandas import: the spec loader runs at DAG parse
time, and the task functions only call methods of the columns they are given.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from etl.errors import ValidationFailed
from etl.spec.model import (
    BINARY,
    LABEL_OPS,
    LABEL_TASKS,
    LABEL_TRANSFORMS,
    MULTICLASS,
    REGRESSION,
    Label,
    SpecError,
    check_choice,
    check_name,
    get_field,
    reject_unknown,
)

if TYPE_CHECKING:
    import pandas as pd

_OPS = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le,
        "eq": operator.eq}
COUNTS, MOMENTS = "counts", "moments"
_SHOWN = 5  # unknown class values named in a failure


@dataclass(frozen=True)
class LabelTask:
    """The ETL stage functions of one label task.

    encode(label, typed source, source column type) -> the prepared label column;
    summary: how ``etl.statistics`` summarizes it (``counts`` or ``moments``);
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


# How YAML 1.1 (and CSV exports) spell a boolean: an unquoted ``positive: yes`` is read as
# true, and matches a column holding any of these spellings, in any case.
BOOL_SPELLINGS = {True: ("true", "yes", "y", "t", "on", "1"),
                  False: ("false", "no", "n", "f", "off", "0")}


def _binary(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    """1 where the comparison holds, or (``positive``) where the value is a positive one."""
    if not label.positive:
        return _OPS[label.op](source, label.value).astype("int64")
    return positive_mask(label.positive, _class_text(label, source, source_type)).astype("int64")


def positive_mask(positive: tuple[str | int | bool, ...], text: pd.Series) -> pd.Series:
    """Rows whose value (as class text) is one of ``positive``: strings and integers match
    their text exactly, a boolean any of its spellings (``BOOL_SPELLINGS``) in any case."""
    exact = [str(p) for p in positive if not isinstance(p, bool)]
    mask = text.isin(exact)
    for flag in {p for p in positive if isinstance(p, bool)}:
        mask |= text.str.lower().isin(BOOL_SPELLINGS[flag])
    return mask


def _class_text(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    """Class values as text: an int64 source gives "3", not the float parse's "3.0", and so
    does a float64 source's whole number (a column with nulls, or written ``3.0``); a fraction
    is a class too (voltage settings 0.8, 1.2, ...), written as the shortest text that reads
    back as the same number."""
    del label
    if source_type == "int64":
        return source.astype("Int64").astype("str")
    if source_type == "float64":
        values = source.astype("float64")
        whole = (values == values.round()) & (values.abs() < float("inf"))
        if not bool(whole.all()):
            return values.map(_number_text).astype("str")
        return values.astype("Int64").astype("str")
    return source.astype("str")


def _number_text(value: float) -> str:
    """3.0 -> "3", 0.8 -> "0.8", inf -> "inf"."""
    return str(int(value)) if value.is_integer() else repr(value)


def _as_float(label: Label, source: pd.Series, source_type: str) -> pd.Series:
    del label, source_type
    return source.astype("float64")


def _fixed_classes(label: Label, counts: dict[str, dict[str, int]], where: str) -> dict[str, Any]:
    del counts, where
    return label.schema()


def _resolve_binary(label: Label, counts: dict[str, dict[str, int]], where: str
                    ) -> dict[str, Any]:
    """A ``positive`` label must find both classes in the train split: a positive value that
    matches no row (a typo, another case) would train a model of one class."""
    train: dict[str, int] = {}
    for value, n in (counts.get("train") or {}).items():
        key = str(int(float(value)))
        train[key] = train.get(key, 0) + int(n)
    if label.positive and not (train.get("1") and train.get("0")):
        which = "no" if not train.get("1") else "every"
        elsewhere = _held_out_rows(counts, "1" if which == "no" else "0")
        if elsewhere:  # the class exists, too rarely to reach train
            fix = (f"it holds {elsewhere} row(s) of eval and test only: too few to learn "
                   f"from; gather more rows of that class, or choose another label")
        else:
            fix = (f"name a value the column holds (it is matched exactly, a boolean by its "
                   f"spellings {list(BOOL_SPELLINGS[True])} in any case)")
        raise ValidationFailed(
            f"label {label.name!r} (column {label.source!r}): {where}.label.positive "
            f"{list(label.positive)} matches {which} row of the train split "
            f"({sum(train.values())} rows); {fix}", {"positive_rows": int(train.get("1", 0))})
    return label.schema()


def _held_out_rows(counts: dict[str, dict[str, int]], klass: str) -> int:
    """Rows of binary class ``klass`` ("1" the positive, "0" the rest) in eval and test."""
    return sum(int(n) for split, seen in counts.items() if split != "train"
               for value, n in seen.items() if str(int(float(value))) == klass)


def _resolve_classes(label: Label, counts: dict[str, dict[str, int]],
                     where: str) -> dict[str, Any]:
    """The spec's classes, or every split's values (sorted): a class seen only in eval or test
    is still a class (a small table may hold a rare one once); every value must be one."""
    names = list(label.names) or sorted({v for seen in counts.values() for v in seen})
    known = set(names)
    unknown: dict[str, list[str]] = {}
    for split, seen in counts.items():
        for value in sorted(set(seen) - known):
            unknown.setdefault(value, []).append(f"{split}: {seen[value]}")
    if unknown:
        origin = label.names_from or f"{where}.label.classes {names}"
        shown = "; ".join(f"{v!r} ({', '.join(n)} rows)" for v, n in list(unknown.items())[:_SHOWN])
        raise ValidationFailed(
            f"label {label.name!r} (column {label.source!r}): {len(unknown)} value(s) not in "
            f"{origin}: {shown}. Nothing was published.",
            {"unknown_classes": sorted(unknown)})
    if len(names) < 2:
        raise ValidationFailed(f"label {label.name!r}: the rows hold {len(names)} "
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
    BINARY: LabelTask(BINARY, _binary, COUNTS, _resolve_binary, _store_int),
    MULTICLASS: LabelTask(MULTICLASS, _class_text, COUNTS, _resolve_classes, _store_index,
                          _inherit_classes, lambda label: bool(label.names)),
    REGRESSION: LabelTask(REGRESSION, _as_float, MOMENTS, _fixed_classes, _store_float),
}


def label_task(label: Label) -> LabelTask:
    """The task object of a spec's label (the spec loader has checked the name)."""
    return TASKS[label.task]


# --- the label block -------------------------------------------------------------------------

_COMMON = ("name", "source", "task", "drop_reason")
_NUMERIC = ("int64", "float64")
# Classes come from string, integer or whole-number float columns (read as "1", not "1.0").
_CLASS_TYPES = ("string", "int64", "float64")


def parse_label(d: dict, where: str, available: dict[str, str]) -> Label:
    """The label of any task (``binary`` when ``task`` is absent: the comparison form)."""
    task = check_choice(get_field(d, "task", where, str, BINARY), LABEL_TASKS, f"{where}.task")
    name = check_name(get_field(d, "name", where, str), f"{where}.name")
    source = get_field(d, "source", where, str)
    if source not in available:
        raise SpecError(f"{where}.source: {source!r} is not an extracted column "
                        f"(columns: {sorted(available)})")
    drop = get_field(d, "drop_reason", where, str, Label.drop_reason)
    return _PARSERS[task](d, where, Label(name=name, source=source, drop_reason=drop, task=task),
                          available[source])


def _fields(d: dict, where: str, own: tuple[str, ...], label: Label, source_type: str,
            allowed: tuple[str, ...], needs: str) -> None:
    """The task's fields only, and a source column of a type the task can use."""
    reject_unknown(d, (*_COMMON, *own), where)
    if source_type not in allowed:
        raise SpecError(f"{where}.source: {label.source!r} must be {needs}, is {source_type}")


def _parse_binary(d: dict, where: str, label: Label, source_type: str) -> Label:
    """The comparison form (``op``, ``value``) or the class form (``positive``)."""
    if "positive" in d:
        return _parse_positive(d, where, label, source_type)
    _fields(d, where, ("op", "value"), label, source_type, _NUMERIC,
            "numeric for a binary comparison (or name the positive class: positive: ...)")
    op = check_choice(get_field(d, "op", where, str), LABEL_OPS, f"{where}.op")
    value = get_field(d, "value", where, (int, float))
    return Label(**{**label.__dict__, "op": op, "value": float(value)})


def _parse_positive(d: dict, where: str, label: Label, source_type: str) -> Label:
    """``positive: "yes"`` (one value) or ``positive: [a, b]`` (those against the rest)."""
    _fields(d, where, ("positive",), label, source_type, _CLASS_TYPES,
            "a string, integer or whole-number column for a binary label with positive")
    raw = d["positive"]
    values = raw if isinstance(raw, list) else [raw]
    if (not values or len(set(map(str, values))) != len(values)
            or any(not isinstance(v, (str, int)) or isinstance(v, str) and not v
                   for v in values)):
        raise SpecError(f"{where}.positive: expected the positive class's value (a string, "
                        f"an integer or a boolean) or a list of distinct ones, got {raw!r}")
    return replace(label, positive=tuple(values))


def _parse_multiclass(d: dict, where: str, label: Label, source_type: str) -> Label:
    _fields(d, where, ("classes",), label, source_type, _CLASS_TYPES,
            "a string, int64 or whole-number float64 column for a multiclass label")
    raw = get_field(d, "classes", where, list, [])
    names = tuple(str(c) for c in raw)
    if raw and (len(names) < 2 or len(set(names)) != len(names)
                or any(isinstance(c, (bool, float, dict, list)) for c in raw)):
        raise SpecError(f"{where}.classes: expected at least 2 distinct class values "
                        f"(strings or integers), got {raw!r}")
    return Label(**{**label.__dict__, "names": names, "classes": len(names)})


def _parse_regression(d: dict, where: str, label: Label, source_type: str) -> Label:
    _fields(d, where, ("transform",), label, source_type, _NUMERIC,
            "numeric (int64/float64) for a regression label")
    transform = check_choice(d.get("transform"), LABEL_TRANSFORMS, f"{where}.transform")
    return Label(**{**label.__dict__, "dtype": "float32", "classes": 0, "transform": transform})


_PARSERS: dict[str, Callable[[dict, str, Label, str], Label]] = {
    BINARY: _parse_binary, MULTICLASS: _parse_multiclass, REGRESSION: _parse_regression}
