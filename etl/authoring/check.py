"""``etl spec check``: a spec and its GX suite checked without touching data or running the ETL.

Every problem names the file, the field and what was expected: the spec loader's own checks
(fields, cross-references, scheduling keys) and, for tabular specs, the suite loaded the way
validation loads it (every expectation a GX 1.x type, tagged row or dataset level, naming only
declared columns). Reports stop at the spec's first error: later fields may depend on it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from etl.errors import PipelineError
from etl.kinds import kind_of
from etl.spec.load import spec_path
from etl.spec.scheduling import read_settings
from etl.validation.gx import load_suite
from etl.validation.tabular import ValidationSpec, check_dataset_metrics


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
        spec = kind.stage("load_spec")(str(report.path))
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
        suite = load_suite(spec.expectations, spec.column_types())
        check_dataset_metrics(suite, ValidationSpec.of(spec))
    except (PipelineError, ValueError) as exc:
        report.problems.append(str(exc))
        return report
    levels = Counter({"row": len(suite.row), "dataset": len(suite.dataset)})
    report.summary.append(f"{spec.expectations}: {levels['row']} row-level and "
                          f"{levels['dataset']} dataset-level expectations; "
                          f"{len(spec.features)} features, label {spec.label.name!r}")
    return report
