"""``etl spec check``: a spec and its GX suite checked without touching data or running the ETL.

Every problem names the file, the field and what was expected: the spec loader's own checks
(fields, cross-references, scheduling keys) and, for tabular specs, the suite loaded the way
validation loads it (every expectation a GX 1.x type, tagged row or dataset level, naming only
declared columns). Reports stop at the spec's first error: later fields may depend on it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from etl.errors import PipelineError
from etl.kinds import kind_of
from etl.spec.labels import positive_mask
from etl.spec.load import spec_path
from etl.spec.model import MULTICLASS, Spec
from etl.spec.scheduling import read_settings
from etl.validation import ValidationSpec, check_dataset_metrics


@dataclass
class CheckReport:
    """What ``spec check`` found; ``ok`` when ``problems`` is empty."""

    target: str
    path: Path | None = None
    kind: str | None = None
    problems: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_spec(name_or_path: str) -> CheckReport:
    """Load the spec (by name on the specs search path, or a spec.yaml path) and its suite."""
    report = CheckReport(target=name_or_path)
    try:
        report.path = spec_path(name_or_path)
        kind = kind_of(str(report.path))
        report.kind = kind.name
        spec = kind.load_spec(str(report.path))
    except (PipelineError, ValueError, OSError) as exc:
        report.problems.append(str(exc))
        return report
    settings = read_settings(report.path)
    report.summary.append(f"{report.path}: {kind.name} spec {spec.name!r}, DAGs etl_{spec.name} "
                          f"and train_{spec.name}; schedule {settings.schedule or 'default'}"
                          + (f", training {settings.training}" if settings.training else ""))
    if kind.name != "tabular":
        return report
    if not Path(spec.expectations).is_file():
        report.problems.append(f"{report.path}.expectations: expected a GX suite file at "
                               f"{spec.expectations}, not found")
        return report
    try:
        from etl.validation.gx import load_suite  # GX: only once a suite is checked

        suite = load_suite(spec.expectations, spec.column_types())
        check_dataset_metrics(suite, ValidationSpec.of(spec))
    except (PipelineError, ValueError) as exc:
        report.problems.append(str(exc))
        return report
    report.problems.extend(classes_against_suite(spec, report.path))
    if report.problems:
        return report
    levels = Counter({"row": len(suite.row), "dataset": len(suite.dataset)})
    report.summary.append(f"{spec.expectations}: {levels['row']} row-level and "
                          f"{levels['dataset']} dataset-level expectations; "
                          f"{len(spec.features)} features, label {spec.label.name!r}")
    return report


def classes_against_suite(spec: Spec, path: Path) -> list[str]:
    """A multiclass spec's listed classes (or a binary label's ``positive``) against the
    suite's value set for the label column.

    The suite states which values the data holds; a value it allows that ``classes`` does not
    list fails the ETL once it arrives, and a listed class it forbids can never be learned.
    Checked without data: both name the spec field and the expectation.
    """
    label = spec.label
    if not (label.task == MULTICLASS and label.names or label.positive):
        return []
    problems = []
    raw = json.loads(Path(spec.expectations).read_text()).get("expectations", [])
    for i, exp in enumerate(raw):
        kwargs = exp.get("kwargs") or {}
        if exp.get("type") != "expect_column_values_to_be_in_set" \
                or kwargs.get("column") != label.source:
            continue
        allowed = {str(v) for v in kwargs.get("value_set") or ()}
        if label.positive:
            problems.extend(_positive_against(label.positive, allowed, path, spec, i))
            continue
        unlisted, forbidden = sorted(allowed - set(label.names)), sorted(set(label.names) - allowed)
        if unlisted or forbidden:
            problems.append(
                f"{path}.label.classes: expected the values {spec.expectations} expectation #{i} "
                f"(expect_column_values_to_be_in_set on {label.source!r}) allows; "
                + "; ".join(part for part in (
                    f"allowed there but not listed: {unlisted}" if unlisted else "",
                    f"listed but not allowed there: {forbidden}" if forbidden else "") if part)
                + f" (classes: {list(label.names)})")
    return problems


def _positive_against(positive: tuple, allowed: set[str], path: Path, spec: Spec,
                      i: int) -> list[str]:
    """Each ``label.positive`` value must be one the suite allows: one it forbids matches no
    row, so the run would find no positive class (a typo, another case)."""
    import pandas as pd  # only where a positive label is checked

    values = pd.Series(sorted(allowed), dtype="str")
    missing = [p for p in positive if not positive_mask((p,), values).any()]
    if not missing:
        return []
    return [(f"{path}.label.positive: {missing} matches none of the values "
             f"{spec.expectations} expectation #{i} (expect_column_values_to_be_in_set on "
             f"{spec.label.source!r}) allows: {sorted(allowed)}")]
