"""The tabular kind: a spec's sources (CSV, JSON lines, Parquet) read into rows, checked row by
row against its GX suite, prepared into Examples and written as segments.

``window`` (the kind's ``KIND``: the window's build, each segment's build), ``judge`` (the
window judged from its segments' stored partials, the joins that left columns empty, the
statistics merged, drift),
``read`` (a segment's rows: raw files, timestamps, the window filter, the lookups),
``prepare`` (features, label, split, statistics) and ``land`` (``etl land``'s upstreams).
The spec model is ``etl.spec`` (the DAG files read it at parse time); the row checks are the
GX layer's (``etl.validation``).
"""
