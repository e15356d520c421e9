"""Keras models built from a version's manifest: the two tabular families (``mlp``, ``trees``),
what they share (``tabular``: the three views, the vocabulary lookup, the SavedModel export) and
every task's head (``heads``). The images kind's CNN is its own (``training.kinds.images.model``).
"""
