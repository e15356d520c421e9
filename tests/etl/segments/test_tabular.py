"""The tabular segment builder's own seams; the window it builds (plan, segments, compaction,
classes learned) is exercised through the chain in ``tests/etl/segments/test_build.py``."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.dagtest import REPO

PROBE = """
import json, sys
from etl.segments import tabular
before = "great_expectations" in sys.modules
first = tabular._import_gx()
second = tabular._import_gx()
print(json.dumps({"before": before, "first": first, "second": second,
                  "after": "great_expectations" in sys.modules}))
"""


def test_the_build_records_what_importing_gx_cost_it_once_per_process() -> None:
    """Planning a window loads no GX; the build imports it on first use and records the
    seconds (the bench counts them as fixed overhead), then 0.0 once it is loaded."""
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=120)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] is False and seen["after"] is True
    assert seen["first"] > 0.0
    assert seen["second"] == 0.0
