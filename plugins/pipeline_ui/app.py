"""FastAPI app of the pipeline UI: datasets -> versions -> version / model pages.

Server-rendered HTML (Jinja2, autoescape on), so it works inside the Airflow UI's iframe and
every stored value is escaped on the way out. One static script (``static/ui.js``, no stored
data in it) follows Airflow's colour mode and opens Airflow links in the page around the frame. Mounted by the
Airflow plugin under ``URL_PREFIX``; ``create_app`` also runs standalone for tests.
"""

from __future__ import annotations

import json
import mimetypes
import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.exceptions import HTTPException as StarletteHTTPException

from etl.versions import diff_text

from . import diffpage, predictions, present, trend, views
from .catalog import Catalog, InvalidName, Limits, NotFound, StorageUnavailable
from .records import DEFAULT_LIMITS, RESULTS_FILE, VALIDATION_DIR, Page, paginate
from .runs import RunRow, RunSource
from .validation import code_spans, validation_view

URL_PREFIX = "/pipeline"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ROOT_ENV = "PIPELINE_STORAGE_ROOT"
MODELS_ON_DATASET_PAGE = 5

# Our pages run only our own static script (no inline code, nothing stored); stored Data
# Docs get a sandbox without scripts.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "frame-ancestors 'self'; base-uri 'none'; form-action 'self'")
STORED_HTML_CSP = ("sandbox allow-same-origin allow-popups allow-popups-to-escape-sandbox; "
                   "default-src 'self'; style-src 'self' 'unsafe-inline' https:; "
                   "font-src 'self' https: data:; img-src 'self' https: data:; "
                   "script-src 'none'; frame-ancestors 'self'")

# Airflow's answer to a token it cannot decode (expired ones are a 401 "Token Expired").
INVALID_TOKEN = "Invalid JWT token"
PageQ = Annotated[int, Query(ge=1, le=1_000_000, description="1-based page number")]
PerPageQ = Annotated[int | None, Query(ge=1, le=10_000, description="page size (capped)")]


def default_root() -> str:
    """Storage root from PIPELINE_STORAGE_ROOT, else the repo's ``.data`` like the CLIs."""
    return os.environ.get(ROOT_ENV) or f"file://{REPO / '.data'}"


class Urls:
    """Links relative to where the app is mounted; every path segment is percent-quoted."""

    def __init__(self, request: Request, url_prefix: str) -> None:
        self.base = str(request.scope.get("root_path", "")).rstrip("/")
        self.airflow = self.base.removesuffix(url_prefix) if url_prefix else self.base

    def _join(self, *parts: str) -> str:
        return "/".join([self.base, *(quote(p, safe="") for p in parts)])

    def home(self) -> str:
        return self.base + "/"

    def static(self, name: str) -> str:
        return f"{self.base}/static/{quote(name)}"

    def dataset(self, ds: str) -> str:
        return self._join("datasets", ds)

    def version(self, ds: str, v: str) -> str:
        return self._join("datasets", ds, "versions", v)

    def version_diff(self, ds: str, v: str, against: str | None = None) -> str:
        url = self._join("datasets", ds, "versions", v, "diff")
        return f"{url}?against={quote(against, safe='')}" if against else url

    def validation(self, ds: str, v: str) -> str:
        return self._join("datasets", ds, "versions", v, "validation")

    def version_file(self, ds: str, v: str, relpath: str) -> str:
        return self._join("datasets", ds, "versions", v, "files") + "/" + quote(relpath)

    def model(self, ds: str, v: str, run: str) -> str:
        return self._join("datasets", ds, "versions", v, "models", run)

    def model_file(self, ds: str, v: str, run: str, relpath: str) -> str:
        return self._join("datasets", ds, "versions", v, "models", run, "files") + "/" + quote(relpath)

    def predictions(self, ds: str, window: str, model: str) -> str:
        return self._join("datasets", ds, "predictions", window, model)

    def dag_run(self, dag_id: str, run_id: str) -> str:
        return f"{self.airflow}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def _templates() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(bytes=present.human_bytes, fmt=present.fmt, when=present.when_span,
                       label=views.label, cell=views.cell, breakable=present.breakable,
                       breakable_ids=present.breakable_ids,
                       metric=present.metric, metric_cell=views.metric_cell,
                       wrap_class=present.wrap_class, diff_count=diff_text.count,
                       diff_signed=diff_text.signed, diff_figure=diff_text.figure,
                       diff_share=diff_text.share, diff_shift=diff_text.shift,
                       code_spans=code_spans)
    env.globals.update(key_metrics=present.key_metrics, summary=present.version_summary,
                       splits=present.ordered_splits,
                       dag_run=present.dag_run_target, drift_words=trend.drift_words,
                       trend_rows=trend.trend_rows, sparkline=trend.sparkline,
                       model_badge=views.model_badge)
    return env


def _auth_dependencies() -> list[Any]:
    """Inside Airflow, plugin apps get no authentication of their own: require a UI user."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return [Depends(requires_access_view(AccessView.WEBSITE))]


# long: the routes are closures over this app's storage root and limits, read top to bottom
def create_app(root: str | None = None, *, limits: Limits = DEFAULT_LIMITS, airflow_auth: bool = False,
               url_prefix: str = "", runs: RunSource | None = None) -> FastAPI:
    """Build the UI app over one storage root.

    Args:
        root: storage root URI; defaults to ``default_root()``.
        limits: page-size, listing and file-size ceilings.
        airflow_auth: require an authenticated Airflow user (set when mounted in Airflow).
        url_prefix: where Airflow mounts the app, to derive links into the Airflow UI.
        runs: each dataset's DAG runs (Airflow's metadata DB); None: none shown.
    """
    catalog = Catalog(root or default_root(), limits)
    app = FastAPI(title="Pipeline datasets", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=_auth_dependencies() if airflow_auth else [])
    app.state.catalog = catalog
    env = _templates()
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    def render(request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("root", catalog.root)  # error pages pass None: anonymous visitors see them
        html = env.get_template(template).render(urls=Urls(request, url_prefix),
                                                 limits=catalog.limits, **ctx)
        return HTMLResponse(html, status_code=status)

    _install_handlers(app, render)
    _install_security_headers(app)

    def with_dags() -> set[str]:
        try:
            return runs.dataset_names() if runs else set()
        except Exception:  # noqa: BLE001 -- the metadata DB is down: storage still lists
            return set()

    def recent_runs(dataset: str) -> tuple[list[RunRow], str | None]:
        if runs is None:
            return [], None
        try:
            return runs.recent(dataset), None
        except Exception as exc:  # noqa: BLE001 -- say so on the page, show the rest
            return [], f"{type(exc).__name__}: {exc}"

    @app.get("/", response_class=HTMLResponse, name="datasets")
    def datasets(request: Request, page: PageQ = 1, per_page: PerPageQ = None) -> Response:
        return render(request, "datasets.html",
                      listing=catalog.datasets(page, per_page, also=with_dags()))

    @app.get("/datasets/{dataset}", response_class=HTMLResponse, name="dataset")
    def dataset(request: Request, dataset: str, page: PageQ = 1, per_page: PerPageQ = None,
                ) -> Response:
        try:
            listing = catalog.versions(dataset, page, per_page, MODELS_ON_DATASET_PAGE)
        except NotFound:
            if page > 1 or dataset not in with_dags():
                raise
            listing = Page([], 1, catalog.clamp(per_page), 0)  # DAGs, nothing published yet
        recent, runs_error = recent_runs(dataset)
        unpublished = [(v, validation_view(r)) for v, r in catalog.unpublished(dataset)]
        return render(request, "dataset.html", dataset=dataset, listing=listing,
                      runs=recent, runs_error=runs_error, runs_shown=runs is not None,
                      current=catalog.current_model(dataset), unpublished=unpublished)

    @app.get("/datasets/{dataset}/versions/{version}", response_class=HTMLResponse, name="version")
    def version(request: Request, dataset: str, version: str, page: PageQ = 1,
                per_page: PerPageQ = None) -> Response:
        manifest = catalog.manifest(dataset, version)
        shards = present.shard_rows(manifest)
        models, models_total = catalog.models(dataset, version)
        listing = paginate(shards, page, catalog.clamp(per_page))
        return render(request, "version.html", dataset=dataset, version=version, manifest=manifest,
                    shards=listing, models=models, models_total=models_total,
                    current=catalog.current_model(dataset),
                    schema=present.schema_rows(manifest), raw=present.raw_json(manifest),
                    segments=present.segment_rows(manifest),
                    extra=[(views.label(k), v) for k, v in present.other_fields(manifest)],
                    expectations=present.expectation_rows(manifest.verdict.expectations),
                    fingerprint=views.fingerprint(manifest), labelled=views.labelled,
                    previous=diffpage.previous_version(catalog.version_ids(dataset)[0], version),
                    scored=catalog.predictions(dataset, window=version),
                    states=catalog.states(dataset, [version]).get(version, ()))

    @app.get("/datasets/{dataset}/versions/{version}/validation", response_class=HTMLResponse,
             name="validation")
    def validation(request: Request, dataset: str, version: str) -> Response:
        try:
            manifest = catalog.manifest(dataset, version)
        except NotFound as missing:  # a failed validation: its results, marked not published
            try:
                results = catalog.unpublished_results(dataset, version)
            except NotFound:
                raise missing from None
            return render(request, "validation.html", dataset=dataset, version=version,
                          manifest=None, view=validation_view(results),
                          results_path=f"{VALIDATION_DIR}/{RESULTS_FILE}")
        relpath = str(manifest.verdict.results or "")
        if not relpath:
            raise NotFound(f"version {dataset}/{version} stored no validation results")
        data, _ = catalog.version_file(dataset, version, relpath)
        try:
            results = json.loads(data)
        except ValueError as exc:
            raise StorageUnavailable(f"{relpath} is not valid JSON: {exc}") from exc
        view = validation_view(results if isinstance(results, dict) else {})
        return render(request, "validation.html", dataset=dataset, version=version,
                      manifest=manifest, view=view, results_path=relpath)

    @app.get("/datasets/{dataset}/versions/{version}/files/{path:path}", name="version_file")
    def version_file(dataset: str, version: str, path: str) -> Response:
        data, name = catalog.version_file(dataset, version, path)
        return _file_response(data, name, stored_html=True)

    @app.get("/datasets/{dataset}/versions/{version}/models/{run}", response_class=HTMLResponse,
             name="model")
    def model(request: Request, dataset: str, version: str, run: str) -> Response:
        detail = catalog.model(dataset, version, run)
        urls = Urls(request, url_prefix)
        card = (present.render_markdown(views.card_without(detail.card, "Hyperparameters"),
                                        lambda p: urls.model_file(dataset, version, run, p))
                if detail.card is not None else None)
        run_id, dag_id = views.training_run(run, dataset, detail.metrics)
        return render(request, "model.html", dataset=dataset, version=version, detail=detail,
                    current=catalog.current_model(dataset),
                    badge=views.model_badge(detail.metrics, catalog.current_model(dataset)),
                    card=card, view=views.model_view(detail.metrics), run_id=run_id, dag_id=dag_id,
                    scored=catalog.predictions(dataset, model=predictions.model_id(version, run)),
                    raw=present.raw_json(detail.metrics) if detail.metrics is not None else None)

    @app.get("/datasets/{dataset}/versions/{version}/models/{run}/files/{path:path}",
             name="model_file")
    def model_file(dataset: str, version: str, run: str, path: str) -> Response:
        data, name = catalog.model_image(dataset, version, run, path)
        return _file_response(data, name, stored_html=False)

    diffpage.install(app, catalog, render)
    predictions.install(app, catalog, render)
    return app


def _file_response(data: bytes, name: str, *, stored_html: bool) -> Response:
    """Serve a stored file read-only; stored HTML is sandboxed so its scripts never run here."""
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if not stored_html and not media.startswith("image/"):
        raise NotFound(f"{name!r} is not an image")
    headers = {"Cache-Control": "private, max-age=300"}
    if stored_html:
        headers["Content-Security-Policy"] = STORED_HTML_CSP
    return Response(data, media_type=media, headers=headers)


def _install_handlers(app: FastAPI, render: Any) -> None:
    """Domain errors become readable pages with the right status; bad names are 400."""

    def handler(status: int, title: str) -> Any:
        def handle(request: Request, exc: Exception) -> Response:
            return render(request, "error.html", status=status, title=title, message=str(exc),
                          root=None)
        return handle

    @app.exception_handler(RequestValidationError)
    def bad_query(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's default is a raw 422 JSON body; say which parameter and what it allows.
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'} "
                    f"{_allowed(e)} (got {str(e.get('input'))[:40]!r})" for e in exc.errors()]
        return render(request, "error.html", status=400, title="Bad request", root=None,
                      message="; ".join(problems) + ".")

    app.add_exception_handler(NotFound, handler(404, "Not found"))
    app.add_exception_handler(InvalidName, handler(400, "Bad request"))
    app.add_exception_handler(StorageUnavailable, handler(503, "Storage unavailable"))

    @app.exception_handler(StarletteHTTPException)  # routing's 404/405 too, not only ours
    def http_error(request: Request, exc: HTTPException) -> Response:
        # A browser without a valid session (none, expired, or a token Airflow no longer
        # accepts) is sent to Airflow's login and back; APIs get the status.
        signed_out = exc.status_code == 401 or exc.detail == INVALID_TOKEN
        if signed_out and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(_login_url(str(request.url)), status_code=303)
        if exc.status_code == 404:
            return render(request, "error.html", status=404, title="Not found", root=None,
                          message=f"there is no page at {request.url.path}")
        return render(request, "error.html", status=exc.status_code, title="Error",
                      message=str(exc.detail), root=None,
                      login=_login_url(str(request.url)) if exc.status_code == 403 else None)


def _login_url(next_url: str) -> str:
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().get_url_login(next_url=next_url)


def _allowed(error: dict[str, Any]) -> str:
    """What a query parameter allows, from pydantic's error context, in a few words."""
    ctx = error.get("ctx") or {}
    if "ge" in ctx and "le" in ctx:
        return f"must be a whole number from {ctx['ge']:,} to {ctx['le']:,}"
    if "ge" in ctx or "le" in ctx:
        return (f"must be a whole number, {ctx['ge']:,} or more" if "ge" in ctx
                else f"must be a whole number, {ctx['le']:,} or less")
    if str(error.get("type", "")).startswith("int"):
        return "must be a whole number"
    return str(error.get("msg", "is not valid")).lower()


def _install_security_headers(app: FastAPI) -> None:
    """CSP without scripts, no MIME sniffing, framable only by the Airflow UI (same origin)."""

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response
