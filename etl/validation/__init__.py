"""Validation: every row against the dataset's Great Expectations suite, bad rows quarantined.

Modules: ``tabular`` (the suite over every partition plus dataset-level checks; the only place
that imports Great Expectations, through ``gx``), ``partition`` (row-level checks of one
partition), ``metrics`` (whole-dataset aggregates), ``types`` (column parsing), ``report``
(results, Data Docs, summaries), ``images`` (decoding and checking image files) and ``modes``.
"""
