"""Scoring (batch inference): the dataset's current blessed model answers for a window's rows.

``python -m training score`` and the ``score_<dataset>`` DAG call ``score_version`` (the rows of
a published version, read through tf.data) or ``score_raw`` (raw files with no label yet, read
and checked by the spec's own sources and suite; rows that fail are quarantined, not scored).
Either way the rows go through the exported SavedModel's ``serving_default`` signature, what
serving runs (``model``), and the answers are written as Parquet parts under
``predictions/<dataset>/<window>/<model>/`` and published manifest-last under a writer lease,
like a version (``publish``): idempotent per window and model, never half-written. The
manifest carries the counts and the predicted distribution beside the model's own on its
test split, with a drift verdict (``drift``).
"""
