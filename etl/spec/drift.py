"""The spec's ``drift`` block: per-feature limits of the drift report, and calendar features.

```yaml
drift:
  default: {mean_shift: 0.5, psi: 0.2, null_share: 0.1}
  features:
    temp: {mean_shift: 1.0}
    month: {calendar: true}   # a function of the event time: not tested night to night
```

Limits differ by feature on purpose: a weather reading moves more from day to day than a
route's distance, and an operator who knows that should not be warned every night.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from etl.spec.fields import SpecError, get_field, reject_unknown

LIMITS = ("mean_shift", "psi", "null_share")


@dataclass(frozen=True)
class DriftLimits:
    """When a statistic of new data counts as drifted (see ``etl.transform.drift``).

    ``mean_shift``: |mean_new - mean_old| in old standard deviations; ``psi``: the population
    stability index of a categorical's value shares (< 0.1 stable, > 0.2 shifted, the usual
    reading); ``null_share``: the rise of the share of missing values (0.1 = 10 points).
    """

    mean_shift: float = 0.5
    psi: float = 0.2
    null_share: float = 0.1
    calendar: bool = False  # a function of the event time: excluded from the nightly test


@dataclass(frozen=True)
class DriftSpec:
    """The default limits and each named feature's own."""

    default: DriftLimits = DriftLimits()
    features: dict[str, DriftLimits] = field(default_factory=dict)

    def limits(self, feature: str) -> DriftLimits:
        return self.features.get(feature, self.default)


def _limits(d: Any, where: str, base: DriftLimits, allow_calendar: bool) -> DriftLimits:
    if not isinstance(d, dict):
        raise SpecError(f"{where}: expected a mapping like {{mean_shift: 0.5}}, got {d!r}")
    reject_unknown(d, (*LIMITS, "calendar") if allow_calendar else LIMITS, where)
    values: dict[str, Any] = {}
    for key in LIMITS:
        value = get_field(d, key, where, (int, float), None)
        if value is not None and value <= 0:
            raise SpecError(f"{where}.{key}: expected a positive number, got {value!r}")
        if key == "null_share" and value is not None and value > 1:
            raise SpecError(f"{where}.null_share: expected a share in (0, 1], got {value!r}")
        if value is not None:
            values[key] = float(value)
    if allow_calendar:
        values["calendar"] = get_field(d, "calendar", where, bool, False)
    return replace(base, **values)


def parse_drift(raw: dict, where: str, features: set[str]) -> DriftSpec:
    """The ``drift`` block of a spec (``where``: the file); names must be features."""
    block = get_field(raw, "drift", where, dict, {})
    w = f"{where}.drift"
    reject_unknown(block, ("default", "features"), w)
    default = _limits(get_field(block, "default", w, dict, {}), f"{w}.default", DriftLimits(),
                      False)
    own = {}
    for name, d in get_field(block, "features", w, dict, {}).items():
        if name not in features:
            raise SpecError(f"{w}.features.{name}: not a feature or the label of this spec; "
                            f"expected one of {sorted(features)}")
        own[name] = _limits(d, f"{w}.features.{name}", default, True)
    return DriftSpec(default, own)
