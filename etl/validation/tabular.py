"""What tabular validation needs from a spec, and the suite checks made before any read.

The suite file beside the spec tags each expectation ``meta.level``: ``row`` checks run on
every row of every segment (``etl.validation.partition``, called by ``etl.segments.build``);
``dataset`` checks are judged on the window's merged metric partials
(``etl.validation.window``, called by ``etl.segments.judge``). This module only describes the
spec to both and refuses a dataset-level check no partial can answer, before any data is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etl.spec.load import spec_path
from etl.validation import gx as vgx
from etl.validation import types as vtypes
from etl.validation.metrics import unsupported
from etl.validation.report import describe
from etl.validation.window import result_format


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
        """Column -> parse kind (int/float/timestamp/string) for the partition views."""
        return {c: vtypes.KINDS.get(t, "string") for c, t in self.columns.items()}


def check_dataset_metrics(suite: vgx.SplitSuite, vspec: ValidationSpec) -> None:
    """Fail on a dataset-level expectation Dask cannot evaluate, before reading any data."""
    fmt = result_format(vspec.key)
    for cfg in suite.dataset:
        names = [mc.metric_name for mc in vgx.required_metrics(cfg, fmt)]
        missing = unsupported(names)
        if missing:
            raise vgx.SuiteError(
                f"{vspec.expectations}: dataset-level {describe(cfg)} needs metrics "
                f"{missing} that etl.validation.metrics cannot compute on the whole dataset"
            )
