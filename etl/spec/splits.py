"""The ``split`` block and column declarations of a spec: the parts with their own rules.

Kept apart from ``etl.spec.load`` (the whole tabular spec) because image specs share
``parse_split`` and the identity options only make sense for tables.
"""

from __future__ import annotations

from typing import Any

from etl.spec.fields import SpecError, check_choice, check_name, get_field, reject_unknown
from etl.spec.model import COLUMN_TYPES, REGRESSION, SPLIT_BY, TIME_FORMATS, Split


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_split(d: dict, where: str, columns: dict[str, str] | None = None) -> Split:
    """The ``split`` block; image specs share it (``columns`` None: fractions and salt only),
    so one rule splits every dataset."""
    extra = ("by", "group_by", "stratify") if columns is not None else ()
    reject_unknown(d, ("fractions", "salt", *extra), where)
    fracs = get_field(d, "fractions", where, dict)
    items = tuple((check_name(k, f"{where}.fractions"), v) for k, v in fracs.items())
    if not items or any(not _is_number(v) or not 0 < v <= 1 for _, v in items):
        raise SpecError(f"{where}.fractions: expected split names with fractions in (0, 1], "
                        f"got {fracs!r}")
    if abs(sum(v for _, v in items) - 1.0) > 1e-9:
        raise SpecError(f"{where}.fractions: must sum to 1, got {sum(v for _, v in items)}")
    if "train" not in fracs:
        raise SpecError(f"{where}.fractions: a 'train' split is required (statistics use it)")
    return Split(fractions=tuple((k, float(v)) for k, v in items),
                 salt=str(get_field(d, "salt", where, (str, int), "")),
                 **(_split_identity(d, where, columns) if columns is not None else {}))


def _split_identity(d: dict, where: str, columns: dict[str, str]) -> dict[str, Any]:
    """``by`` (key or row), ``group_by`` (primary-source columns) and ``stratify``."""
    by = check_choice(get_field(d, "by", where, str, "key"), SPLIT_BY, f"{where}.by")
    group_by = tuple(get_field(d, "group_by", where, list, []))
    for col in group_by:
        if col not in columns:
            raise SpecError(f"{where}.group_by: {col!r} is not a column of the primary source")
    stratify = get_field(d, "stratify", where, bool, False)
    if group_by and stratify:
        raise SpecError(f"{where}: group_by keeps each group in one split, so its classes cannot "
                        f"also be stratified; drop stratify or group_by")
    return {"by": by, "group_by": group_by, "stratify": stratify}


def tabular_split(raw: dict, w: str, columns: dict[str, str], task: str) -> Split:
    split = parse_split(get_field(raw, "split", w, dict), f"{w}.split", columns)
    if split.stratify and task == REGRESSION:
        raise SpecError(f"{w}.split.stratify: a regression label has no classes to stratify by")
    return split


def column_type(decl: Any, where: str) -> tuple[str, str | None]:
    """A column's type, ``int64`` or ``{type: timestamp, format: "%Y/%m/%d"}`` (strftime codes,
    ``epoch_s`` or ``epoch_ms``); the format only for timestamps. The mapping form may also
    name the file's header (``source:``, see ``column_header``)."""
    if not isinstance(decl, dict):
        return check_choice(decl, COLUMN_TYPES, where), None
    reject_unknown(decl, ("type", "format", "source"), where)
    kind = check_choice(decl.get("type"), COLUMN_TYPES, f"{where}.type")
    fmt = get_field(decl, "format", where, str, None)
    if fmt is not None and kind != "timestamp":
        raise SpecError(f"{where}.format: only a timestamp column takes a format, this is {kind!r}")
    if fmt is not None and fmt not in TIME_FORMATS and "%" not in fmt:
        raise SpecError(f"{where}.format: expected strftime codes like '%Y/%m/%d' or one of "
                        f"{list(TIME_FORMATS)}, got {fmt!r}")
    return kind, fmt


def column_header(decl: Any, column: str, where: str) -> str:
    """The header the raw file holds for ``column``: ``source:`` if given (any non-empty text,
    kept exactly: spaces, dots, case), else the column's own name.

    The key is the identifier every later stage uses; ``source`` is whatever the upstream
    export calls it, which a user cannot rename.
    """
    if not isinstance(decl, dict) or decl.get("source") is None:
        return column
    header = decl["source"]
    if not isinstance(header, str) or not header:
        hint = f"; quote it: source: \"{header}\"" if isinstance(header, (int, float)) else ""
        raise SpecError(f"{where}.source: expected the column's header in the file (a "
                        f"non-empty string), got {header!r}{hint}")
    return header
