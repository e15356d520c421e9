"""Row-level validation of ONE Dask partition, run inside a worker task.

The task sees a pandas frame, builds (or reuses) the worker's GX context, validates every
row, writes the partition's rejected rows to quarantine, and returns only small facts:
counts, a few unexpected values and example keys per expectation, and the positions of
rejected rows so the caller can drop them without collecting any data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from etl.errors import PipelineError
from etl.validation import gx as vgx
from etl.validation.report import columns_of, describe, jsonable, write_parquet
from etl.validation.types import check_views

REASON_COLUMN = "quarantine_reason"
PARTITION_COLUMN = "quarantine_partition"


@dataclass(frozen=True)
class Partial:
    """What one partition says about one row-level expectation."""

    element_count: int = 0
    missing_count: int = 0
    unexpected_count: int = 0
    values: tuple = ()
    examples: tuple = ()
    error: str | None = None


@dataclass(frozen=True)
class PartitionReport:
    """Small, picklable result of validating one partition."""

    number: int
    rows: int
    fingerprint: int
    partials: tuple[Partial, ...]
    bad_positions: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    quarantine_file: str | None = None
    cpu_s: float = 0.0  # CPU time of the task: comparable even on a busy machine


def fingerprint(pdf: pd.DataFrame, key: Sequence[str]) -> int:
    """Order-sensitive hash of the key columns, to detect a partition that changed."""
    if not len(pdf):
        return 0
    hashed = pd.util.hash_pandas_object(pdf[list(key)].reset_index(drop=True), index=True)
    return int(hashed.to_numpy().sum(dtype=np.uint64))


# Every index of an unexpected row, never GX's pandas query string of them (unused here,
# and one more filtered copy of the frame per expectation).
ROW_RESULT_FORMAT = {"result_format": "COMPLETE", "return_unexpected_index_query": False}


def _run(frame: pd.DataFrame, name: str, configs: Sequence[dict]) -> dict[int, dict]:
    """Validate a frame with GX; results keyed by suite ordinal (GX reorders them).

    One GX run per set of columns the expectations read, over a frame of those columns
    alone: GX filters the frame it is given (nulls, unexpected rows) three or four times per
    expectation, so a frame of every checked column made that cost grow with the square of
    the column count (a third of the validation of a wide table).
    """
    groups: dict[tuple[str, ...], list[dict]] = {}
    for cfg in configs:
        groups.setdefault(tuple(columns_of(cfg["kwargs"])), []).append(cfg)
    out: dict[int, dict] = {}
    for cols, cfgs in groups.items():
        batch = vgx.batch_definition().get_batch(batch_parameters={"dataframe": frame[list(cols)]})
        res = batch.validate(vgx.suite_of(name, cfgs), result_format=ROW_RESULT_FORMAT)
        out.update({r.expectation_config.meta[vgx.ORDINAL_META]: r for r in res.results})
    return out


def _partial(res, pdf: pd.DataFrame, cfg: dict, key: Sequence[str]) -> tuple[Partial, np.ndarray]:
    """Condense one GX result to counts, a few values/examples, and rejected positions."""
    if res.exception_info and res.exception_info.get("raised_exception"):
        msg = str(res.exception_info.get("exception_message"))
        return Partial(element_count=len(pdf), error=msg), np.empty(0, np.int64)
    r = res.result or {}
    if "unexpected_count" not in r:  # aggregate verdict (in_type_list on a typed column)
        missing = int(pdf[cfg["kwargs"]["column"]].isna().sum())
        if res.success:
            return Partial(len(pdf), missing), np.empty(0, np.int64)
        pos = np.arange(len(pdf), dtype=np.int64)
        observed = f"dtype {r.get('observed_value')}"
        return Partial(len(pdf), missing, len(pdf), (observed,), examples(pdf, pos, cfg, key)), pos
    pos = np.asarray(r.get("unexpected_index_list") or [], dtype=np.int64)
    # the values as they arrived ("2475", "12a"), not GX's parsed view of them
    col = cfg["kwargs"].get("column")
    raw = pdf[col].iloc[pos[: vgx.PARTIAL_COUNT]] if col else r.get("unexpected_list") or []
    values = tuple(jsonable(v) for v in list(raw)[: vgx.PARTIAL_COUNT])
    return (
        Partial(
            element_count=int(r.get("element_count") or 0),
            missing_count=int(r.get("missing_count") or 0),
            unexpected_count=int(r["unexpected_count"]),
            values=values,
            examples=examples(pdf, pos, cfg, key),
        ),
        pos,
    )


def _used_columns(configs: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(c for cfg in configs for c in columns_of(cfg["kwargs"])))


def examples(pdf: pd.DataFrame, pos: np.ndarray, cfg: dict, key: Sequence[str]) -> tuple:
    if not len(pos):
        return ()
    cols = list(dict.fromkeys([*key, *columns_of(cfg["kwargs"])]))
    rows = pdf.iloc[pos[: vgx.PARTIAL_COUNT]][cols]
    return tuple({c: jsonable(v) for c, v in row.items()} for _, row in rows.iterrows())


@dataclass
class Evaluation:
    """What GX said about one frame: per expectation ordinal the result (absent where a
    strict parse settled a type check), the condensed partial and the rejected positions;
    ``type_bad``: rows a type check rejected, left out of the value checks."""

    results: dict[int, object]
    partials: dict[int, Partial]
    rejected: dict[int, np.ndarray]
    type_bad: np.ndarray


def evaluate(pdf: pd.DataFrame, suite_name: str, row_configs: Sequence[dict],
             kinds: Mapping[str, str], key: Sequence[str]) -> Evaluation:
    """Run the row-level expectations over ``pdf`` (a RangeIndex frame) in two GX calls.

    In-type-list expectations run first on a per-value view; rows they reject are left out
    of the other checks so that one bad "12a" is reported once, as a type error.
    """
    tagged = [
        dict(c, meta={**c.get("meta", {}), vgx.ORDINAL_META: i}) for i, c in enumerate(row_configs)
    ]
    type_cfgs = [c for c in tagged if c["type"] == vgx.TYPE_EXPECTATION]
    value_cfgs = [c for c in tagged if c["type"] != vgx.TYPE_EXPECTATION]
    type_view, value_view, clean = check_views(
        pdf, kinds, _used_columns(type_cfgs), _used_columns(value_cfgs)
    )
    partials, rejected = _cleanly_typed(pdf, type_cfgs, clean)
    results: dict[int, object] = {}
    pending = [c for c in type_cfgs if c["meta"][vgx.ORDINAL_META] not in partials]
    for i, res in _run(type_view[_used_columns(pending)], suite_name, pending).items():
        results[i] = res
        partials[i], rejected[i] = _partial(res, pdf, row_configs[i], key)
    type_bad = np.unique(np.concatenate([np.empty(0, np.int64), *rejected.values()]))
    rest = value_view.drop(index=type_bad)
    for i, res in _run(rest, suite_name, value_cfgs).items():
        results[i] = res
        partials[i], rejected[i] = _partial(res, pdf, row_configs[i], key)
    return Evaluation(results, partials, rejected, type_bad)


def validate_partition(
    pdf: pd.DataFrame,
    number: int,
    suite_name: str,
    row_configs: Sequence[dict],
    kinds: Mapping[str, str],
    key: Sequence[str],
    quarantine_uri: str,
) -> PartitionReport:
    """Validate every row of one partition against the row-level expectations."""
    cpu0 = time.thread_time()
    pdf = pdf.reset_index(drop=True)
    ev = evaluate(pdf, suite_name, row_configs, kinds, key)
    bad, qfile = quarantine(pdf, number, row_configs, ev.rejected, quarantine_uri)
    return PartitionReport(
        number=number,
        rows=len(pdf),
        fingerprint=fingerprint(pdf, key),
        partials=tuple(ev.partials.get(i, Partial()) for i in range(len(row_configs))),
        bad_positions=bad,
        quarantine_file=qfile,
        cpu_s=time.thread_time() - cpu0,
    )


def _cleanly_typed(
    pdf: pd.DataFrame, type_cfgs: Sequence[dict], clean: Mapping[str, str]
) -> tuple[dict[int, Partial], dict[int, np.ndarray]]:
    """Type checks already settled by a strict parse: the column parsed whole to a dtype
    the expectation lists, which is the one thing GX's dtype check would look at.

    Skipping GX for them saves a third of the per-partition cost on clean data.
    """
    partials, rejected = {}, {}
    for cfg in type_cfgs:
        col = cfg["kwargs"]["column"]
        if clean.get(col) in (cfg["kwargs"].get("type_list") or ()):
            i = cfg["meta"][vgx.ORDINAL_META]
            partials[i] = Partial(len(pdf), int(pdf[col].isna().sum()))
            rejected[i] = np.empty(0, np.int64)
    return partials, rejected


def quarantine(
    pdf: pd.DataFrame,
    number: int,
    configs: Sequence[dict],
    rejected: Mapping[int, np.ndarray],
    quarantine_uri: str,
) -> tuple[np.ndarray, str | None]:
    """Write rejected rows (as they arrived) with the reasons; return their positions."""
    reasons: dict[int, list[str]] = {}
    for i in sorted(rejected):
        for p in rejected[i].tolist():
            reasons.setdefault(p, []).append(describe(configs[i]))
    if not reasons:
        return np.empty(0, np.int64), None
    bad = np.array(sorted(reasons), dtype=np.int64)
    out = pdf.iloc[bad].copy()
    out[REASON_COLUMN] = ["; ".join(reasons[p]) for p in bad.tolist()]
    out[PARTITION_COLUMN] = number
    name = f"part-{number:05d}.parquet"
    write_parquet(out, quarantine_uri, name)
    return bad, name


def keep_valid(
    pdf: pd.DataFrame,
    report: PartitionReport,
    key: Sequence[str],
) -> pd.DataFrame:
    """Drop the rejected rows of a re-read partition, refusing one that changed meanwhile."""
    if len(pdf) != report.rows or fingerprint(pdf, key) != report.fingerprint:
        raise PipelineError(
            f"partition {report.number} changed between validation and use "
            f"({report.rows} rows validated, {len(pdf)} now): the input must be re-readable "
            "deterministically (stage it to Parquet first)"
        )
    mask = np.ones(len(pdf), dtype=bool)
    mask[report.bad_positions] = False
    return pdf.iloc[mask]
