"""Objects a run writes under a local storage root (issue 25's ``objects_per_nightly_run``).

On a bucket every object written is a request and a thing to list, so the count matters more
than the bytes. Two observations of one run:

- ``strace`` (when installed): every file the run's process tree opens for writing with
  ``O_CREAT`` under the root, one per open, transient ones included (temp files renamed or
  removed before the run ends, lease files, staging). This is the figure (``method: strace``).
- a listing of the root before and after: files that are new or changed (size, mtime or inode)
  and files removed. Always taken; it is the figure only where strace is missing.

A rename or link of a file written in the same run is not a second object (a GCS upload of
the final name would be one request); a lease refreshed by rewriting counts each write.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.proctree import run_checked

# openat(AT_FDCWD, "/path", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3
_OPEN = re.compile(r'^(?:open|openat|creat)\((?:[^,]*, )?"((?:[^"\\]|\\.)*)"(?:, ([A-Z_|]+))?'
                   r'.*\) = (\d+)')
SYSCALLS = "open,openat,creat"


def listing(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``folder``: relative path -> (size, mtime_ns, inode)."""
    out = {}
    for path in folder.rglob("*"):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def diff(before: dict[str, tuple[int, int, int]],
         after: dict[str, tuple[int, int, int]]) -> dict[str, list[str]]:
    """New, changed and removed files between two listings."""
    return {"new": sorted(set(after) - set(before)),
            "changed": sorted(k for k in set(after) & set(before) if after[k] != before[k]),
            "removed": sorted(set(before) - set(after))}


def creations(trace_lines: list[str], root: Path) -> list[str]:
    """Paths under ``root`` that strace saw opened for writing with O_CREAT, one per open."""
    prefix = str(root).rstrip("/") + "/"
    out = []
    for line in trace_lines:
        match = _OPEN.match(line.strip())
        if not match:
            continue
        path, flags = match.group(1), match.group(2) or ""
        if path.startswith(prefix) and ("O_CREAT" in flags or line.startswith("creat(")) \
                and ("O_WRONLY" in flags or "O_RDWR" in flags or line.startswith("creat(")):
            out.append(path[len(prefix):])
    return out


def _traced(cmd: list[str], env: dict[str, str] | None, root: Path) -> list[str] | None:
    """``cmd`` run under strace (every process of its tree); None when strace is missing."""
    strace = shutil.which("strace")
    if strace is None:
        run_checked(cmd, env=env, cwd=Path(__file__).resolve().parent.parent)
        return None
    with tempfile.TemporaryDirectory(prefix="bench-strace-") as tmp:
        run_checked([strace, "-f", "-ff", "-qq", "-e", f"trace={SYSCALLS}", "-e", "signal=none",
                     "-o", f"{tmp}/trace", *cmd],
                    env=env, cwd=Path(__file__).resolve().parent.parent)
        lines = [line for f in sorted(Path(tmp).iterdir())
                 for line in f.read_text(errors="replace").splitlines()]
    return creations(lines, root)


def count_written(cmd: list[str], root: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` (a run against the ``file://`` ``root``) and count what it wrote there."""
    folder = Path(root.removeprefix("file://"))
    before = listing(folder)
    created = _traced(cmd, env, folder)
    change = diff(before, listing(folder))
    listed = len(change["new"]) + len(change["changed"])
    out: dict[str, Any] = {"listing": {k: len(v) for k, v in change.items()},
                           "listing_written": listed, "listing_paths": change}
    if created is None:
        return {**out, "objects": listed, "method": "listing diff (strace not installed)"}
    gone = sorted(set(created) - set(change["new"]) - set(change["changed"]))
    return {**out, "objects": len(created), "method": "strace: opens with O_CREAT for writing",
            "distinct_files": len(set(created)), "renamed_or_removed": len(gone),
            "renamed_or_removed_paths": gone[:200]}
