"""Declarative dataset specs: a new tabular dataset needs a YAML file, not new code.

A spec lives at ``etl/examples/<name>/spec.yaml`` (the GX suite beside it) and names the sources,
the lookup joins, the key, the label, the features, the leakage columns that must never reach
the Examples, the split rule and the shard settings. Everything is checked when the spec is
loaded, so a typo fails with the file and the field named before any data is touched.
Import-light on purpose (yaml only): the DAG files and the validation stage read specs too.

Column contract between the stages: extraction hands over CSV/JSON-lines columns as *strings*
exactly as the raw files hold them, named by their identifiers (a column declared with
``source:`` is found by that header and renamed at the read, ``Source.headers``), and
``Spec.column_types()`` says what each should parse to, so a type change is caught by
validation with a readable message; the transform parses them after validation
(``etl.kinds.tabular.prepare.coerce_types``).

Modules: ``model`` (the dataclasses and allowed values), ``fields`` (field checks shared with
image specs), ``load`` (YAML loading and cross-reference checks), ``labels`` (the label block,
one parser per task: binary, multiclass, regression) and ``images`` (image specs).
"""

from __future__ import annotations

from etl.spec.load import SPECS_DIR, load_spec
from etl.spec.model import (
    COMPRESSIONS,
    DEFAULT_SHARD_BYTES,
    DatasetSpec,
    Feature,
    Join,
    Source,
    Spec,
    SpecError,
    Split,
    check_name,
    check_relpath,
)

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_SHARD_BYTES",
    "SPECS_DIR",
    "DatasetSpec",
    "Feature",
    "Join",
    "Source",
    "Spec",
    "SpecError",
    "Split",
    "check_name",
    "check_relpath",
    "load_spec",
]
