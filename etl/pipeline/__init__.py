"""The ETL chain the DAG tasks and ``python -m etl`` call, one for every dataset kind.

``build_version`` (plan the window, build its missing segments, judge it, write the draft)
then ``publish`` (``manifest.json`` last; it returns a ``PublishedVersion``, ``etl.versions.catalog``'s);
``run`` does both (``chain``, with the run's options
and record and each step's line for operators). The segments themselves are made by the
dataset's kind (``etl.kinds``) over ``etl.segments``; ``arrival`` says whether a window has
landed, ``gc`` what dead runs left.
"""

from __future__ import annotations

from etl.pipeline.chain import RunOptions, build_version, land, publish, run
from etl.versions.catalog import PublishedVersion

__all__ = ["PublishedVersion", "RunOptions", "build_version", "land", "publish", "run"]
