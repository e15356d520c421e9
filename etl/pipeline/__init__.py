"""The ETL steps the DAG tasks and ``python -m etl`` call; each returns a URI or a small dict.

``extract -> validate -> transform_and_write -> publish``, or ``run`` for all four on one Dask
client. Modules: ``steps`` (land, extract, validate, run), ``publish`` (shards under the writer
lock, then the manifest last) and ``record`` (the run record that travels between steps).
"""

from __future__ import annotations

from etl.pipeline.publish import publish, transform_and_write
from etl.pipeline.steps import extract, land, run, validate

__all__ = ["extract", "land", "publish", "run", "transform_and_write", "validate"]
