"""The plugin's package (``pipeline_ui``) lives in plugins/, which Airflow puts on the path."""

from __future__ import annotations

import sys
from pathlib import Path

PLUGINS = str(Path(__file__).resolve().parents[2] / "plugins")
if PLUGINS not in sys.path:
    sys.path.insert(0, PLUGINS)
