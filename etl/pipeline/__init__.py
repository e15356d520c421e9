"""The ETL chain the DAG tasks and ``python -m etl`` call, one for every dataset kind.

``build_version`` (plan the window, build its missing segments, judge it, write the draft)
then ``publish`` (``manifest.json`` last); ``run`` does both (``chain``). The segments
themselves are made in ``etl.segments``; ``record`` holds the run's options and record,
``summary`` each step's line for operators, ``arrival`` whether a window has landed, ``gc``
what dead runs left.
"""

from __future__ import annotations

from etl.pipeline.chain import build_version, land, publish, run
from etl.pipeline.record import RunOptions

__all__ = ["RunOptions", "build_version", "land", "publish", "run"]
