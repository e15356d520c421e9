"""The ``label`` block of a tabular spec: one parser per task, chosen once by ``task``.

A task's parser checks only the fields that task has (a regression label has no ``op``; a
binary one no ``classes``), so a field set for the wrong task fails as an unknown field
naming the file and the dotted path, before any data is touched.
"""

from __future__ import annotations

from collections.abc import Callable

from etl.spec.fields import SpecError, check_choice, check_name, get_field, reject_unknown
from etl.spec.model import (
    BINARY,
    LABEL_OPS,
    LABEL_TASKS,
    LABEL_TRANSFORMS,
    MULTICLASS,
    REGRESSION,
    Label,
)

_COMMON = ("name", "source", "task", "drop_reason")
_NUMERIC = ("int64", "float64")
# Classes come from string or integer columns; a float column would make "1.0" a class name.
_CLASS_TYPES = ("string", "int64")


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


def _binary(d: dict, where: str, label: Label, source_type: str) -> Label:
    _fields(d, where, ("op", "value"), label, source_type, _NUMERIC,
            "numeric for a binary comparison")
    op = check_choice(get_field(d, "op", where, str), LABEL_OPS, f"{where}.op")
    value = get_field(d, "value", where, (int, float))
    return Label(**{**label.__dict__, "op": op, "value": float(value)})


def _multiclass(d: dict, where: str, label: Label, source_type: str) -> Label:
    _fields(d, where, ("classes",), label, source_type, _CLASS_TYPES,
            "a string or int64 column for a multiclass label")
    raw = get_field(d, "classes", where, list, [])
    names = tuple(str(c) for c in raw)
    if raw and (len(names) < 2 or len(set(names)) != len(names)
                or any(isinstance(c, (bool, float, dict, list)) for c in raw)):
        raise SpecError(f"{where}.classes: expected at least 2 distinct class values "
                        f"(strings or integers), got {raw!r}")
    return Label(**{**label.__dict__, "names": names, "classes": len(names)})


def _regression(d: dict, where: str, label: Label, source_type: str) -> Label:
    _fields(d, where, ("transform",), label, source_type, _NUMERIC,
            "numeric (int64/float64) for a regression label")
    transform = check_choice(d.get("transform"), LABEL_TRANSFORMS, f"{where}.transform")
    return Label(**{**label.__dict__, "dtype": "float32", "classes": 0, "transform": transform})


_PARSERS: dict[str, Callable[[dict, str, Label, str], Label]] = {
    BINARY: _binary, MULTICLASS: _multiclass, REGRESSION: _regression}
