"""Judging a model: its figures on the held-out split (``evaluate``) and the verdict on them
(``gate``: whether the splits can say anything, the checks, the blessing, the current model)."""
