"""The predictions page: one window scored by one model (``training.score``).

``/datasets/<d>/predictions/<window>/<model>`` shows the counts (rows read, scored,
quarantined), the predicted class (or value bin) distribution beside the model's own on its
test split with the PSI and the drift verdict the score run stored, and links back to the
version scored and the model page. The version page lists the predictions of its window and
the model page those its model made, each linking here. Its own module, so the routes in
``app`` stay a list of one-screen functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from .catalog import Catalog


@dataclass(frozen=True)
class Bar:
    """One class (or bin) of the distribution: counts and shares, scored and reference."""

    label: str
    scored: int
    scored_share: float
    reference: int
    reference_share: float


@dataclass(frozen=True)
class PredictionsView:
    """What the page shows of a predictions manifest (read here once, by key: the UI imports
    no training code, and the manifest is ``training.score.run``'s JSON)."""

    window: str
    model: str
    version: str | None  # the version scored; None for raw files
    model_version: str
    model_run: str
    kind: str  # "class" or "bin"
    bars: list[Bar]
    psi: float | None
    psi_limit: float | None
    drifted: bool
    rows: int
    scored: int
    quarantined: int
    quarantine: str | None  # the quarantine file, relative to the folder
    raw_files: list[str]
    parts: list[tuple[str, int]]  # (file, rows)
    run_id: str
    created_at: str


def view(window: str, model: str, published: dict[str, Any]) -> PredictionsView:
    """The page's figures from the manifest the score run published."""
    dist = published.get("distribution") or {}
    labels = dist.get("labels") or []

    def at(key: str, i: int) -> Any:
        values = dist.get(key) or []
        return values[i] if i < len(values) else 0

    bars = [Bar(str(label), int(at("scored", i)), float(at("scored_shares", i)),
                int(at("reference", i)), float(at("reference_shares", i)))
            for i, label in enumerate(labels)]
    source, by = published.get("source") or {}, published.get("model") or {}
    psi = dist.get("psi")
    return PredictionsView(
        window, model, source.get("version") if source.get("kind") == "version" else None,
        str(by.get("version") or ""), str(by.get("run") or ""), str(dist.get("kind") or "class"),
        bars, psi if isinstance(psi, (int, float)) and math.isfinite(psi) else None,
        dist.get("psi_limit"), bool(dist.get("drifted")), int(published.get("rows") or 0),
        int(published.get("scored") or 0), int(published.get("quarantined") or 0),
        published.get("quarantine"), [str(f.get("uri")) for f in source.get("files") or []],
        [(str(p.get("file")), int(p.get("rows") or 0)) for p in published.get("parts") or []],
        str(published.get("run_id") or ""), str(published.get("created_at") or ""))


def model_id(version: str, run: str) -> str:
    """A model's folder name under a window's predictions (``training.score.model``)."""
    return f"{version}--{run}"


def install(app: FastAPI, catalog: Catalog, render: Any) -> None:
    """Add the predictions route to ``app`` (``render``: the app's template renderer)."""

    @app.get("/datasets/{dataset}/predictions/{window}/{model}", response_class=HTMLResponse,
             name="predictions")
    def predictions(request: Request, dataset: str, window: str, model: str) -> Response:
        published = catalog.prediction(dataset, window, model)
        return render(request, "predictions.html", dataset=dataset,
                      view=view(window, model, published), current=catalog.current_model(dataset))
