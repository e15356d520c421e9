"""Where dataset specs live and how Airflow should run them: one definition for etl and dags.

A top-level package on purpose: the DAG files may not import ``etl`` at parse time (it is a
heavy import root), yet both must agree on the specs search path and on the per-spec
scheduling keys. Dependency-free apart from PyYAML, and it imports nothing of this project
(an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

from flightpipe_specs.folders import (
    DEFAULT_SPECS_DIR,
    SPEC_FILE,
    SPECS_PATH_ENV,
    DuplicateSpecError,
    SpecNotFoundError,
    find_specs,
    search_path,
    spec_file,
)
from flightpipe_specs.settings import (
    SETTINGS_KEYS,
    TRAINING_KEYS,
    DagSettings,
    SpecSettingsError,
    parse_settings,
    read_settings,
)

__all__ = [
    "DEFAULT_SPECS_DIR", "SETTINGS_KEYS", "SPECS_PATH_ENV", "SPEC_FILE", "TRAINING_KEYS",
    "DagSettings", "DuplicateSpecError", "SpecNotFoundError", "SpecSettingsError", "find_specs",
    "parse_settings", "read_settings", "search_path", "spec_file",
]
