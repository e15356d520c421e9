"""Validation: every row against the dataset's Great Expectations suite, bad rows quarantined.

Modules: ``partition`` (row-level checks of one segment's rows, run by ``etl.segments.build``),
``window`` (a window judged from its segments' partials), ``gx`` (suites loaded and judged by Great
Expectations), ``tabular`` (what validation needs from a spec; suite checks before any read),
``metrics`` and ``partials`` (mergeable whole-dataset aggregates), ``types`` (column parsing),
``report`` (results, Data Docs, summaries), ``images`` (decoding and checking image files) and
``modes``.
"""
