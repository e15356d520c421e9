"""Raw rows that have no label yet, read and checked as the ETL reads and checks a window's.

What a model scores before the label exists (tomorrow's flights before departure): raw files of
the spec's primary source, read by its own reader (``read_files``: the declared format,
timestamps normalized, a bad file refused by name), the spec's lookups joined, and every row
judged by the suite's row-level expectations (``etl.validation.check_rows``, one GX run), the
rows that fail written with their reasons to ``quarantine/part-00000.parquet`` under the
caller's folder, as the ETL quarantines them. The label column is neither read nor checked
(a file may hold it or not), unless it is also a key or a feature's input. The valid rows' features are made
exactly as the ETL makes them for a record (``feature_rows``). Used by ``training.score``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from etl import storage
from etl.kinds.tabular.prepare import feature_rows
from etl.kinds.tabular.read import join_lookups, read_files, read_lookups
from etl.spec import Spec
from etl.validation import RowChecks, ValidationSpec, check_rows


@dataclass(frozen=True)
class CheckedRaw:
    """The rows that passed (``features`` in Example dtypes and their ``keys`` as read, in
    the files' order), how many were read, and the URI of the quarantine file of those that
    failed (None when none did)."""

    features: pd.DataFrame
    keys: pd.DataFrame
    rows: int
    quarantined: int
    quarantine_file: str | None


def check_unlabelled(root: str, spec: Spec, uris: list[str], quarantine_uri: str) -> CheckedRaw:
    """Read ``uris`` (files of the spec's primary source) and check every row; the rows that
    fail go to ``quarantine_uri`` with their reasons and are not returned."""
    from etl.validation.gx import load_suite
    from etl.validation.report import columns_of

    label = spec.label.source
    used = {*spec.key, *(c for f in spec.features for c in f.inputs)}
    source = spec.primary_source
    unlabelled = label in source.columns and label not in used  # else the label is an input
    if unlabelled:  # neither read nor checked: a file with or without it reads the same
        source = replace(source, columns={c: t for c, t in source.columns.items() if c != label})
    frame, _ = read_files(list(uris), source)
    if unlabelled:
        frame = frame.assign(**{label: pd.Series([None] * len(frame), dtype=object)})
    rights, _, _ = read_lookups(root, spec)
    frame = join_lookups(frame, spec, rights)
    vspec = ValidationSpec.of(spec)
    suite = load_suite(vspec.expectations, vspec.columns)
    configs = tuple(c for c in suite.row
                    if not (unlabelled and label in columns_of(c["kwargs"])))
    checks = RowChecks(suite.name, configs, vspec.kinds(), tuple(spec.key))
    [checked] = check_rows([frame], checks, [quarantine_uri])
    valid = checked.valid.reset_index(drop=True)
    report = checked.report
    return CheckedRaw(feature_rows(valid, spec), valid[list(spec.key)].reset_index(drop=True),
                      len(frame), len(report.bad_positions),
                      storage.join(quarantine_uri, report.quarantine_file)
                      if report.quarantine_file else None)
