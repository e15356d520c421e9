"""Keras models built from a version's manifest: ``tabular`` (preprocessing inside the model,
so serving takes raw values) and ``images`` (a small CNN)."""
