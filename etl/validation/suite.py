"""What validation needs from a spec and its suite: the validation modes, the declared columns,
and the suite file split into row-level and dataset-level expectation configs.

Nothing here imports Great Expectations: planning, ``spec check`` and the CLI describe a suite
with these types; reading a suite file needs GX (``etl.validation.gx.load_suite``, which the
callers that validate import when they start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etl.errors import PipelineError
from etl.spec.load import spec_path

MODES = ("quarantine", "strict")
"""``quarantine``: rows failing a row-level expectation are set aside while their share stays
under the expectation's ``mostly``; ``strict``: any failing row fails the run."""
ROW = "row"
DATASET = "dataset"
TYPE_EXPECTATION = "expect_column_values_to_be_in_type_list"
KEPT_EXAMPLES = 20  # unexpected values / example rows kept per expectation
# Parse kind of each declared column type (text columns are parsed to check types and ranges).
KINDS = {"int64": "int", "float64": "float", "timestamp": "timestamp", "string": "string"}


def check_mode(mode: str) -> str:
    """``mode`` if it is a validation mode, else a ValueError listing the allowed ones."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    return mode


class SuiteError(PipelineError, ValueError):
    """The expectation suite file is unusable (bad JSON, level, or unknown column)."""


@dataclass(frozen=True)
class SplitSuite:
    """A suite divided by where each expectation is evaluated.

    Attributes:
        name: the suite name, reused for the combined validation result.
        row: expectation configs evaluated on every row of every segment, then summed.
        dataset: expectation configs judged once on the window's merged metric partials.
        meta: suite meta, carried into the results.
    """

    name: str
    row: tuple[dict, ...]
    dataset: tuple[dict, ...]
    meta: dict


@dataclass(frozen=True)
class ValidationSpec:
    """What validation needs from a dataset spec.

    Attributes:
        name: dataset name, used as the suite result's name and in messages.
        key: columns that identify a row (examples and uniqueness).
        columns: expected column -> type (``string``, ``int64``, ``float64``, ``timestamp``).
        expectations: path of the GX ExpectationSuite JSON file.
    """

    name: str
    key: tuple[str, ...]
    columns: dict[str, str]
    expectations: Path

    @classmethod
    def of(cls, spec: Any) -> ValidationSpec:
        """Accept an ``etl.spec.Spec``, a mapping with the same fields, or a ValidationSpec."""
        if isinstance(spec, ValidationSpec):
            return spec
        if isinstance(spec, Mapping):
            name = spec["name"]
            path = Path(spec.get("expectations") or "expectations.json")
            if not path.is_absolute():
                path = Path(spec.get("spec_dir") or spec_path(name).parent) / path
            return cls(name, tuple(spec["key"]), dict(spec["columns"]), path)
        return cls(spec.name, tuple(spec.key), dict(spec.column_types()), Path(spec.expectations))

    def kinds(self) -> dict[str, str]:
        """Column -> parse kind (int/float/timestamp/string) for the row checks' views."""
        return {c: KINDS.get(t, "string") for c, t in self.columns.items()}

