"""Great Expectations itself: the one module of etl that imports it, and only on first use.

GX evaluates one pandas frame at a time, so the whole-window verdict is built in two steps:
each segment's rows are checked (``run_rows``, called by ``etl.validation.rows``), then the
per-segment counts are summed and handed back to the expectation's own validation logic
(``judge_row`` for row-level checks, ``combined_result`` for dataset-level ones fed with
metric values from merged partials, ``etl.validation.metrics``). GX therefore still decides
success (including ``mostly``) and shapes the result exactly as Data Docs expect, but over every
row instead of one frame. Importing GX costs seconds, so the modules that describe a suite
(``etl.validation.suite``) or a plan never import this one at their own import time.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.core import ExpectationSuite, ExpectationValidationResult
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)
from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations.expectation import ColumnMapExpectation, Expectation
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnMapMetricProvider,
    column_condition_partial,
)
from great_expectations.render import LegacyRendererType, RenderedStringTemplateContent
from great_expectations.render.renderer.renderer import renderer

from etl.errors import PipelineError
from etl.validation.report import columns_of, describe, jsonable
from etl.validation.suite import DATASET, ROW, TYPE_EXPECTATION, SplitSuite, SuiteError

ORDINAL_META = "_ordinal"  # position in the suite, injected so split results can be matched
# Map expectations whose verdict depends on other rows: wrong when evaluated per segment.
_CROSS_ROW_MAP_METRICS = frozenset(
    {
        "column_values.unique",
        "compound_columns.unique",
        "select_column_values.unique.within_record",
        "column_values.increasing",
        "column_values.decreasing",
        "column_values.z_score.under_threshold",
    }
)


class ColumnValuesValidHhmm(ColumnMapMetricProvider):
    """Row condition for HHMM clock times: 0..2359 with minutes below 60."""

    condition_metric_name = "column_values.valid_hhmm"

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column, **kwargs):
        return (column >= 0) & (column <= 2359) & (column % 100 < 60)


class ExpectColumnValuesToBeValidHhmm(ColumnMapExpectation):
    """Expect integers that encode a clock time as HHMM (e.g. 515 = 05:15, never 1275).

    A plain range check lets 1275 through; the minute part needs its own rule.
    """

    map_metric = "column_values.valid_hhmm"
    success_keys = ("mostly",)

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(
        cls, configuration=None, result=None, runtime_configuration=None, **kwargs
    ):
        """Data Docs sentence; without it GX prints the raw expectation call."""
        mostly = configuration.kwargs.get("mostly") if configuration else None
        template = "values must be HHMM clock times (0 to 2359, minutes below 60)"
        params: dict[str, Any] = {}
        if isinstance(mostly, (int, float)) and mostly < 1.0:
            template += ", at least $mostly_pct % of the time"
            params["mostly_pct"] = f"{mostly * 100:g}"
        return [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={"template": template + ".", "params": params},
            )
        ]


def _check_types(raw: Any, path: str | Path) -> None:
    """Every expectation type exists: GX logs an unknown one and silently drops it."""
    from great_expectations.exceptions import ExpectationNotFoundError
    from great_expectations.expectations.registry import get_expectation_impl

    items = raw.get("expectations") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise SuiteError(f"{path}.expectations: expected a list of expectations")
    for i, exp in enumerate(items):
        kind = exp.get("type") if isinstance(exp, dict) else None
        try:
            get_expectation_impl(str(kind))
        except ExpectationNotFoundError as exc:
            raise SuiteError(f"{path}: expectation #{i}: type {kind!r} is not a GX 1.x "
                             f"expectation (expected e.g. expect_column_values_to_be_between)"
                             ) from exc


def load_suite(path: str | Path, columns: Iterable[str]) -> SplitSuite:
    """Read a GX ExpectationSuite JSON file and split it into row and dataset parts
    (callers import this module when they start validating, never at their own import).

    Checks up front what would otherwise fail deep inside GX or silently per segment:
    every expectation has ``meta.level``, names only known columns, and row-level ones are
    map expectations that do not compare rows with each other.
    """
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the expectation suite: {exc}") from exc
    _check_types(raw, path)
    try:
        suite = ExpectationSuite(**{k: v for k, v in raw.items() if k != "notes"})
    except Exception as exc:  # GX raises several types for bad configs
        raise SuiteError(f"{path}: not a GX 1.x ExpectationSuite: {exc}") from exc
    known = set(columns)
    row: list[dict] = []
    dataset: list[dict] = []
    for i, exp in enumerate(suite.expectations):
        cfg = exp.configuration.to_json_dict()
        label = f"{path}: expectation #{i} ({cfg['type']})"
        level = (cfg.get("meta") or {}).get("level")
        missing = sorted(set(columns_of(cfg["kwargs"])) - known)
        if missing:
            raise SuiteError(f"{label} names columns {missing} that the spec does not declare")
        if level == ROW:
            _check_row_level(exp, label)
            row.append(cfg)
        elif level == DATASET:
            dataset.append(cfg)
        else:
            raise SuiteError(f'{label}: meta.level must be "row" or "dataset", got {level!r}')
    return SplitSuite(suite.name, tuple(row), tuple(dataset), dict(suite.meta or {}))


def _check_row_level(exp: Expectation, label: str) -> None:
    if not isinstance(exp, ColumnMapExpectation):
        raise SuiteError(f"{label}: only column map expectations can be row-level")
    if exp.map_metric in _CROSS_ROW_MAP_METRICS:
        raise SuiteError(f"{label} compares rows with each other: mark it level dataset")


def to_expectation(cfg: Mapping[str, Any]) -> Expectation:
    """Rebuild a GX Expectation from its JSON config (what suite files store)."""
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    return ExpectationConfiguration(**cfg).to_domain_obj()


_LOCAL = threading.local()


def batch_definition():
    """One ephemeral GX context and pandas batch definition per worker thread.

    Building a context costs far more than validating a small frame, so it is made once
    per thread (GX objects are not documented as thread-safe) and reused by every
    frame that thread checks.
    """
    bd = getattr(_LOCAL, "batch_definition", None)
    if bd is None:
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False),
        )
        context = gx.get_context(mode="ephemeral", project_config=config)
        source = context.data_sources.add_pandas("etl_rows")  # names only in GX
        asset = source.add_dataframe_asset("rows")
        bd = asset.add_batch_definition_whole_dataframe("all_rows")
        _LOCAL.batch_definition = bd
    return bd


def suite_of(name: str, configs: Sequence[Mapping[str, Any]]) -> ExpectationSuite:
    """An in-memory suite of the given expectation configs (nothing is stored)."""
    return ExpectationSuite(name=name, expectations=[dict(c) for c in configs])


# Every index of an unexpected row, never GX's pandas query string of them (unused here,
# and one more filtered copy of the frame per expectation).
ROW_RESULT_FORMAT = {"result_format": "COMPLETE", "return_unexpected_index_query": False}


def run_rows(frame: Any, name: str, configs: Sequence[dict]) -> dict[int, Any]:
    """Validate a frame with GX; results keyed by suite ordinal (``ORDINAL_META``: GX
    reorders them).

    One GX run per set of columns the expectations read, over a frame of those columns
    alone: GX filters the frame it is given (nulls, unexpected rows) three or four times per
    expectation, so a frame of every checked column made that cost grow with the square of
    the column count (a third of the validation of a wide table).
    """
    groups: dict[tuple[str, ...], list[dict]] = {}
    for cfg in configs:
        groups.setdefault(tuple(columns_of(cfg["kwargs"])), []).append(cfg)
    out: dict[int, Any] = {}
    for cols, cfgs in groups.items():
        batch = batch_definition().get_batch(batch_parameters={"dataframe": frame[list(cols)]})
        res = batch.validate(suite_of(name, cfgs), result_format=ROW_RESULT_FORMAT)
        out.update({r.expectation_config.meta[ORDINAL_META]: r for r in res.results})
    return out


def combined_result(
    cfg: Mapping[str, Any], metrics: Mapping[str, Any], result_format: dict
) -> ExpectationValidationResult:
    """Let GX judge one expectation from whole-dataset metric values keyed by metric name."""
    exp = to_expectation(cfg)
    runtime = {"result_format": dict(result_format)}
    deps = exp.get_validation_dependencies(runtime_configuration=runtime)
    by_id: dict = {}
    for name, mc in deps.metric_configurations.items():
        if name not in metrics:
            raise PipelineError(f"{describe(cfg)}: metric {name!r} was not computed")
        by_id[mc.id] = metrics[name]
    evr = exp.metrics_validate(by_id, runtime_configuration=runtime)
    evr.result = jsonable(evr.result)  # numpy scalars break the Data Docs renderer
    return evr


def required_metrics(cfg: Mapping[str, Any], result_format: dict) -> list:
    """The MetricConfigurations GX needs to judge this expectation."""
    exp = to_expectation(cfg)
    deps = exp.get_validation_dependencies(
        runtime_configuration={"result_format": dict(result_format)}
    )
    return deps.get_metric_configurations()


def judge_row(cfg: Mapping[str, Any], totals: Mapping[str, Any], result_format: dict):
    """GX's verdict on a row-level expectation from counts summed over all segments.

    ``totals`` holds element_count, missing_count, unexpected_count, values and examples.
    The expectation's own ``_validate`` applies ``mostly`` and shapes the result; for
    in_type_list the generic map logic is used, since its own one inspects a live dtype.
    """
    exp = to_expectation(cfg)
    name = exp.map_metric
    metrics = {
        "table.row_count": totals["element_count"],
        "column_values.nonnull.unexpected_count": totals["missing_count"],
        f"{name}.unexpected_count": totals["unexpected_count"],
        f"{name}.unexpected_values": list(totals["values"]),
        f"{name}.unexpected_index_list": list(totals["examples"]),
        f"{name}.unexpected_index_query": None,
    }
    runtime = {"result_format": dict(result_format)}
    judge = (
        ColumnMapExpectation._validate if cfg["type"] == TYPE_EXPECTATION else type(exp)._validate
    )
    raw = judge(exp, metrics=metrics, runtime_configuration=runtime)
    evr = (
        raw if isinstance(raw, ExpectationValidationResult) else ExpectationValidationResult(**raw)
    )
    evr.expectation_config = exp.configuration
    evr.result = jsonable(evr.result)
    return evr


def failed_result(cfg: Mapping[str, Any], message: str) -> ExpectationValidationResult:
    """A result recording that evaluating the expectation raised (GX's own convention)."""
    return ExpectationValidationResult(
        success=False,
        expectation_config=to_expectation(cfg).configuration,
        result={},
        exception_info={
            "raised_exception": True,
            "exception_message": message,
            "exception_traceback": None,
        },
    )
