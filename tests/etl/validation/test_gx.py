"""Great Expectations is imported only by the processes that validate.

GX takes seconds to import; planning a window's segments, publishing a version, the CLI's
``show`` and everything that reads versions (training, the UI) import the ETL modules but ask
GX nothing, so importing them must leave ``great_expectations`` out of ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

NO_GX = [
    "etl.validation",  # the package's public API: suite, rows, metrics, report
    "etl.kinds.images.check",
    "etl.segments.plan",  # planning
    "etl.segments.build",  # side files, compaction
    "etl.segments.compose",  # the window judged from partials, the manifest
    "etl.kinds.tabular.window",  # the tabular build: imports GX when it starts
    "etl.kinds.images.window",
    "etl.pipeline",  # build_version, publish, run
    "etl.pipeline.chain",
    "etl.authoring.check",
    "etl.__main__",  # the CLI (``show``, ``versions`` ...)
    "etl.kinds",
]


def _imported(modules: list[str], code: str = "") -> dict[str, bool]:
    """Which of GX and our GX module a fresh interpreter holds after importing ``modules``."""
    script = "\n".join([*(f"import {m}" for m in modules), textwrap.dedent(code),
                        "import json, sys",
                        "print(json.dumps({m: m in sys.modules for m in",
                        "  ('great_expectations', 'etl.validation.gx')}))"])
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_planning_publishing_and_the_cli_do_not_import_gx() -> None:
    assert _imported(NO_GX) == {"great_expectations": False, "etl.validation.gx": False}


def test_loading_a_suite_imports_gx() -> None:
    """The other side: the lazy import is really taken when a suite is read."""
    got = _imported(["etl.validation", "etl.spec"], """
        from etl.spec import load_spec
        from etl.validation import ValidationSpec
        from etl.validation.gx import load_suite
        spec = ValidationSpec.of(load_spec("flights"))
        assert load_suite(spec.expectations, spec.columns).row
    """)
    assert got == {"great_expectations": True, "etl.validation.gx": True}
