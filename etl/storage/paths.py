"""URI joining that works for every scheme, and a safe join for untrusted path parts.

Params and spec values end up in paths; ``safe_join`` is the one place that keeps them
under the storage root (no ``..``, no absolute parts, no symlink escapes on local disk).
"""

from __future__ import annotations

import os
import re

from etl.errors import PathOutsideRootError
from etl.storage.fs import get_fs, is_gcs

_ABSOLUTE = re.compile(r"^(/|\\|[A-Za-z]:|[A-Za-z][\w+.-]*://)")


def join(uri: str, *parts: str) -> str:
    """Join with ``/`` whatever the scheme (``os.path.join`` would mangle ``gs://``)."""
    out = uri.rstrip("/")
    for part in parts:
        if part:
            out = f"{out}/{part.strip('/')}"
    return out


def safe_join(root: str, *parts: str) -> str:
    """``join`` for untrusted parts (Params, spec values): never leaves ``root``.

    Raises:
        PathOutsideRootError: a part is empty, absolute, has ``..`` or a NUL/backslash, or
            (local) resolves through a symlink outside ``root``.
    """
    clean: list[str] = []
    for part in parts:
        bad = not isinstance(part, str) or not part.strip("/. ") or "\x00" in part
        bad = bad or "\\" in part or bool(_ABSOLUTE.match(part))
        segments = [] if bad else [s for s in part.split("/") if s not in ("", ".")]
        if bad or ".." in segments:
            raise PathOutsideRootError(f"path part {part!r} is not allowed under {root!r}")
        clean.extend(segments)
    out = join(root, *clean)
    if not is_gcs(root):
        base = os.path.realpath(get_fs(root)[1])
        real = os.path.realpath(get_fs(out)[1])
        if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
            raise PathOutsideRootError(f"path {'/'.join(parts)!r} resolves outside {root!r}")
    return out
