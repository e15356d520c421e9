"""The gate's verdict on a model (``Blessing``, after TFX's Evaluator) and its checks: made
by ``training.judge.gate``, stored in metrics.json's ``blessing`` and carried by what
``train`` returns (``training.judge.trained``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One check: a short name, whether it passed and the figures it compared."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Blessing:
    """The gate's verdict; ``reasons`` are the details of the failed checks."""

    blessed: bool
    reasons: tuple[str, ...]
    checks: tuple[Check, ...]
    rules: str = ""

    @classmethod
    def of(cls, checks: list[Check], rules: str = "") -> Blessing:
        failed = tuple(c.detail for c in checks if not c.passed)
        return cls(not failed, failed, tuple(checks), rules)

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any] | None) -> Blessing:
        """The verdict ``to_dict`` wrote (a model record's ``blessing``); not blessed when
        the record has none."""
        if not stored:
            return cls(False, ("no verdict stored",), ())
        return cls(bool(stored["blessed"]), tuple(stored["reasons"]),
                   tuple(Check(**c) for c in stored["checks"]), stored.get("rules", ""))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (lists, not tuples): metrics.json and the training task's XCom."""
        return {"blessed": self.blessed, "reasons": list(self.reasons),
                "checks": [asdict(c) for c in self.checks], "rules": self.rules}

    def summary(self) -> str:
        """One plain line for a log or a terminal, ending with the rules it applied."""
        rules = f" [rules: {self.rules}]" if self.rules else ""
        if self.blessed:
            return "blessed: " + "; ".join(c.detail for c in self.checks) + rules
        return "NOT blessed: " + "; ".join(self.reasons) + rules
