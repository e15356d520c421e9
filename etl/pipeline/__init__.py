"""The ETL chain the DAG tasks and ``python -m etl`` call, one for every dataset kind.

``build_version`` (plan the window, build its missing segments, judge it, write the draft:
``build``) then ``publish`` (``manifest.json`` last); ``run`` does both. The segments
themselves are made in ``etl.segments``; ``record`` holds the run's options and record,
``summary`` each step's line for operators, ``gc`` what dead runs left.
"""

from __future__ import annotations

from etl.pipeline.build import build_version
from etl.pipeline.publish import publish
from etl.pipeline.record import RunOptions
from etl.pipeline.steps import land, run

__all__ = ["RunOptions", "build_version", "land", "publish", "run"]
