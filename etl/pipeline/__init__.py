"""The ETL steps the DAG tasks and ``python -m etl`` call; each returns a URI or a small dict.

``extract -> validate -> transform_and_write -> publish``, or ``run`` for all four on one Dask
client. Modules: ``steps`` (land, extract, validate, run), ``publish`` (shards under the writer
lock, then the manifest last) and ``record`` (the run record that travels between steps).
``run_incremental`` builds a version from per-partition segments instead: ``segment_plan``
(the window's segments), ``segment_build`` (one segment in one Dask task), ``compose`` (the
window judged and its manifest from the segments' stored partials), ``incremental``.
"""

from __future__ import annotations

from typing import Any

from etl.pipeline.publish import publish, transform_and_write
from etl.pipeline.steps import extract, land, run, validate

_LAZY = ("build_version", "run_incremental")  # they import GX: only a step that validates may


def __getattr__(name: str) -> Any:
    """``build_version`` and ``run_incremental``, imported on first use, so importing this
    package (every ETL task does) does not import Great Expectations."""
    if name in _LAZY:
        from etl.pipeline import incremental

        return getattr(incremental, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["build_version", "extract", "land", "publish", "run", "run_incremental",
           "transform_and_write", "validate"]
