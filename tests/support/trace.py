"""Which project modules a command executes: ``python -m tests.support.trace OUT -- MODULE ARGS``.

Runs ``python -m MODULE ARGS`` in this process under a profile hook (every thread, Dask's
in-process workers included) and writes to OUT, one per line, each project file whose code ran,
as ``<path>\t<how>``: ``import`` when only its module body ran, ``call`` when a function or
class body defined in it ran too. The route test (tests/test_route.py) turns that into the list
of modules a newcomer must read; the profile hook sees what ran, not what was merely imported
by name, so the list cannot drift from the code.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading
from pathlib import Path

PACKAGES = ("etl", "training")  # the project's code on the route (dags and plugins are not)


def main(argv: list[str]) -> None:
    out, sep, module, *args = argv
    if sep != "--":
        raise SystemExit("usage: python -m tests.support.trace OUT -- MODULE [ARGS...]")
    root = Path(__file__).resolve().parents[2]
    prefixes = tuple(str(root / p) + os.sep for p in PACKAGES)
    seen: dict[str, str] = {}

    def hook(frame, event, arg):  # sys.setprofile calls it so
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(prefixes):
                how = "import" if frame.f_code.co_name == "<module>" else "call"
                if seen.get(path) != "call":
                    seen[path] = how

    def dump() -> None:
        lines = sorted(f"{os.path.relpath(p, root)}\t{how}" for p, how in seen.items())
        Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")

    atexit.register(dump)
    sys.argv = [module, *args]
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        dump()


if __name__ == "__main__":
    main(sys.argv[1:])
