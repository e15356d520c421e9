"""Field checks shared by the tabular and the image spec loaders.

Every check raises ``SpecError`` naming the file and the dotted field path, so a typo in a
spec fails before any data is touched, with a message that says where to look.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from etl.errors import PipelineError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MISSING = object()
# Letters NFKD does not decompose into ASCII, spelled as their languages transliterate them.
_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe",
                          "Œ": "OE", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th", "ð": "d"})
# Soft keywords of every supported Python (3.12 adds ``type``), whatever runs the draft.
_SOFT_KEYWORDS = frozenset({"match", "case", "type", "_"})


class SpecError(PipelineError, ValueError):
    """A spec file is malformed; the message names the file and the field."""


# Columns the pipeline adds to its own frames (split and its hash, shard, encoded record,
# quarantine reason and partition, missing-value bits; lookup join keys get the prefix): a data
# column so named would be overwritten, so a spec may not use one (``source:`` reads such a
# header under another name, and ``column_identifiers`` never drafts one).
RESERVED_COLUMNS = frozenset({"_split", "_hash", "_shard", "_record", "quarantine_reason",
                              "quarantine_partition", "_missing"})
RESERVED_PREFIX = "__join_"

def check_name(value: Any, where: str) -> str:
    """A column or source name: an identifier, since it becomes a feature key and a path part."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise SpecError(f"{where}: expected an identifier like 'arr_delay', got {value!r}")
    return value


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
