"""Land a table that scikit-learn ships (wine, diabetes, ...) as one CSV in the raw zone.

A spec declares it with ``upstream: {from: sklearn, loader: load_wine, ...}``; no code names a
dataset. The table lands as the upstream would deliver it: its columns with names made
identifiers (``od280/od315_of_diluted_wines`` -> ``od280_od315_of_diluted_wines``), a 1-based
row id (``id_column``; these tables have no key of their own), the target renamed to
``target`` and, with ``target_names: true``, written as its class names. Unpartitioned, so
``start``/``end`` do not apply; idempotent and append-only like every landing.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from etl import storage
from etl.sources.land import LandReport, land_one
from etl.spec import Spec
from etl.spec.model import SpecError, reject_unknown

_OPTIONS = ("from", "loader", "options", "target", "target_names", "id_column")


def sklearn_frame(spec: Spec) -> Any:
    """The table the spec's ``upstream`` names, as the raw file will hold it."""
    from sklearn import datasets

    up, where = spec.upstream, f"{spec.path}.upstream"
    reject_unknown(up, _OPTIONS, where)
    loader = up.get("loader")
    if not isinstance(loader, str) or not loader.startswith("load_") \
            or not hasattr(datasets, loader):
        raise SpecError(f"{where}.loader: expected a sklearn.datasets load_* function "
                        f"(load_wine, load_diabetes, ...), got {loader!r}")
    bunch = getattr(datasets, loader)(as_frame=True, **dict(up.get("options") or {}))
    frame = bunch.frame.copy()
    target = str(up.get("target", "target"))
    if up.get("target_names"):
        frame["target"] = [str(bunch.target_names[i]) for i in frame["target"]]
    frame = frame.rename(columns={"target": target})
    frame.columns = [re.sub(r"\W+", "_", str(c)).strip("_") for c in frame.columns]
    if up.get("id_column"):
        frame.insert(0, str(up["id_column"]), range(1, len(frame) + 1))
    return frame


def land_sklearn(root: str, spec: Spec, *, start: date | None = None, end: date | None = None,
                 scale: int = 1, overwrite: bool = False) -> LandReport:
    """Write the table to the primary source's uri (one unpartitioned CSV)."""
    if start or end or scale != 1:
        raise ValueError(f"{spec.name}: an unpartitioned sklearn table lands whole; "
                         f"start/end/scale do not apply")
    source = spec.primary_source
    if source.partitioning is not None or source.format != "csv":
        raise SpecError(f"{spec.path}.sources.{source.name}: an sklearn upstream lands one "
                        f"unpartitioned CSV; set format: csv and no partitioning")
    frame = sklearn_frame(spec)
    report = LandReport(raw_uri=storage.join(root, "raw"), rows=len(frame))
    land_one(storage.safe_join(root, source.uri), frame.to_csv(index=False).encode("utf-8"),
             overwrite, report)
    return report
