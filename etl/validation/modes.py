"""Validation modes, checked before any work starts (by the pipeline and the validator)."""

from __future__ import annotations

MODES = ("quarantine", "strict")
"""``quarantine``: rows failing a row-level expectation are set aside while their share stays
under the expectation's ``mostly``; ``strict``: any failing row fails the run."""


def check_mode(mode: str) -> str:
    """``mode`` if it is a validation mode, else a ValueError listing the allowed ones."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    return mode
