"""Drift and metric trends of a dataset, for the listing pages: words and an inline SVG.

An operator scanning the dataset list wants "did last night drift?" in one word, and on the
dataset page whether the model's headline metric and the drifted feature count move
together over versions. The sparkline is a few SVG elements built here: no chart library,
no network (the UI runs where the Airflow host has none).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from etl.drift_report import DriftReport
from etl.versions import Manifest

_W, _H = 120, 24


def drift_of(manifest: Manifest | None) -> DriftReport | None:
    """The version's drift report, or None (a first version, or nothing new)."""
    return manifest.verdict.drift if manifest is not None else None


def drift_words(manifest: Manifest | None) -> str:
    """``none`` / ``3 features`` / ``not measured``: the drift column of the dataset list."""
    report = drift_of(manifest)
    if report is None:
        return "not measured"
    moved, missing = report.drifted_by_kind()
    if not moved and not missing:
        return "none"
    return ", ".join(([f"{len(moved)} feature{'s' if len(moved) != 1 else ''}"] if moved else [])
                     + ([f"{len(missing)} with more missing values"] if missing else []))


def trend_rows(rows: list[Any], key_metrics: Any) -> list[dict[str, Any]]:
    """Oldest first: per version its train rows, drifted features and newest model's
    headline metric, of its newest finished model (``key_metrics``: the page's chooser of metrics)."""
    out = []
    for row in reversed(rows):
        report = drift_of(row.manifest)
        finished = [m for m in row.models if m.metrics]  # a run still training has none
        chosen = key_metrics(finished[0].metrics) if finished else []
        metric = chosen[0] if chosen else None
        train = row.manifest.splits["train"].num_examples if "train" in row.manifest.splits \
            else None
        drifted = None if report is None else list(report.drifted)
        out.append({"version": row.version, "train": train, "metric": metric,
                    "drifted": drifted, "drift_count": None if drifted is None else len(drifted)})
    return out


def sparkline(values: list[float | None], title: str) -> Markup:
    """A polyline of ``values`` (None: a gap, drawn as a dot-less break), scaled to fit."""
    points = [(i, float(v)) for i, v in enumerate(values) if isinstance(v, (int, float))]
    if len(points) < 2:
        return Markup("")
    low = min(v for _, v in points)
    span = (max(v for _, v in points) - low) or 1.0
    step = _W / max(len(values) - 1, 1)
    xy = " ".join(f"{i * step:.1f},{_H - 2 - (v - low) / span * (_H - 4):.1f}"
                  for i, v in points)
    return Markup(f'<svg class="sparkline" role="img" width="{_W}" height="{_H}" '
                  f'viewBox="0 0 {_W} {_H}"><title>{escape(title)}</title>'
                  f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" '
                  f'points="{xy}"/></svg>')
