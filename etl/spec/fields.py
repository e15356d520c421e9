"""Field checks shared by the tabular and the image spec loaders.

Every check raises ``SpecError`` naming the file and the dotted field path, so a typo in a
spec fails before any data is touched, with a message that says where to look.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from etl.errors import PipelineError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MISSING = object()


class SpecError(PipelineError, ValueError):
    """A spec file is malformed; the message names the file and the field."""


def check_name(value: Any, where: str) -> str:
    """A column or source name: an identifier, since it becomes a feature key and a path part."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise SpecError(f"{where}: expected an identifier like 'arr_delay', got {value!r}")
    return value


def get_field(d: dict, key: str, where: str, types: type | tuple, default: Any = _MISSING) -> Any:
    """One field of a mapping, type-checked, with the dotted field path in the error."""
    if key not in d or d[key] is None and default is not _MISSING:
        if default is _MISSING:
            raise SpecError(f"{where}.{key}: required field is missing")
        return default
    value = d[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _astuple(types):
        names = "/".join(t.__name__ for t in _astuple(types))
        raise SpecError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _astuple(types: type | tuple) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def reject_unknown(d: dict, allowed: tuple[str, ...], where: str) -> None:
    """Unknown fields are typos (``join:`` for ``joins:``) that would silently do nothing."""
    for key in d:
        if key not in allowed:
            raise SpecError(f"{where}.{key}: unknown field; expected one of {list(allowed)}")


def check_choice(value: Any, allowed: tuple, where: str) -> Any:
    """``value`` if it is one of ``allowed``; the error lists what is."""
    if value not in allowed:
        raise SpecError(f"{where}: expected one of {list(allowed)}, got {value!r}")
    return value


def check_relpath(value: str, where: str) -> str:
    """A path or URI from a spec: absolute URIs allowed, relative ones may not climb out."""
    if "://" not in value and (value.startswith("/") or ".." in Path(value).parts):
        raise SpecError(f"{where}: expected a path inside the root (no '..', not absolute), "
                        f"got {value!r}")
    return value
