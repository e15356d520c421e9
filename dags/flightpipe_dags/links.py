"""Links from Airflow to the pipeline UI: task extra links, the Asset event's page URL.

``publish`` gets a "Version page" button, ``train`` a "Model page" button and ``score`` a
"Predictions page" button in the task's details (Airflow 3 operator extra links); ``build``,
when the window fails its validation, a "Validation page" button and a log line opening the
results of the version it did not publish (``failed_validation``). The task body knows the page (the version id, the
model's run folder) and pushes its URL under the link's XCom key (``remember``); Airflow calls
``get_link`` when the task ends and stores what it returns under that key, which is all the
api-server reads to draw the button (a task that ended without a page has none: the API
answers null for its link and the UI lists no button). Its "Extra Links" heading stays: the UI
draws it for any task whose serialized operator declares a link, whatever the URLs, and the
api-server never calls our ``get_link`` (it reads the XCom), so nothing here can hide it.

URLs open the page inside the Airflow UI (the plugin's nav route, deep-linked), under
``[api] base_url`` when it is set, else root-relative. The routes mirror
``plugins/pipeline_ui_plugin.py`` (``NAV_ROUTE``) and ``plugins/pipeline_ui/app.py``
(``URL_PREFIX``, ``Urls``); ``tests/test_dag_links.py`` holds them together.
Import-light like the package: ``airflow.sdk`` and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:  # parse time stays light: the types only annotate
    from etl.versions.catalog import PublishedVersion
    from etl.versions.manifest import Manifest, Verdict

NAV_ROUTE = "/plugin/pipeline-datasets"  # the plugin's external view in the Airflow UI
URL_PREFIX = "/pipeline"  # where the plugin's app is mounted


def airflow_base() -> str:
    """``[api] base_url`` without a trailing slash; empty when unset (root-relative links)."""
    from airflow.sdk import conf

    return (conf.get("api", "base_url", fallback="") or "").rstrip("/")


def page_url(dataset: str, version: str, run: str | None = None, base: str | None = None) -> str:
    """The version page, or a model run's page, inside the Airflow UI."""
    parts = ["datasets", dataset, "versions", version, *(["models", run] if run else [])]
    path = "/".join(quote(p, safe="") for p in parts)
    return f"{airflow_base() if base is None else base}{NAV_ROUTE}{URL_PREFIX}/{path}"


def validation_url(dataset: str, version: str, base: str | None = None) -> str:
    """A version's validation page, which opens for an unpublished (failed) version too."""
    return page_url(dataset, version, base=base) + "/validation"


def predictions_url(dataset: str, window: str, model: str, base: str | None = None) -> str:
    """A window's predictions page (``training.score``) inside the Airflow UI."""
    path = "/".join(quote(p, safe="") for p in ("datasets", dataset, "predictions", window, model))
    return f"{airflow_base() if base is None else base}{NAV_ROUTE}{URL_PREFIX}/{path}"


class _PageLink(BaseOperatorLink):
    """A link whose URL the task pushed under ``xcom_key`` (empty: no button)."""

    name = "Pipeline page"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.bases.xcom import BaseXCom

        try:
            return str(BaseXCom.get_value(ti_key=ti_key, key=self.xcom_key) or "")
        except Exception:  # noqa: BLE001 -- no XCom reachable: no button, never an error
            return ""


class VersionPageLink(_PageLink):
    """``publish``: the version it published (or found already published)."""

    name = "Version page"


class ModelPageLink(_PageLink):
    """``train``: the model run it wrote."""

    name = "Model page"


class ValidationPageLink(_PageLink):
    """``build``: the validation results of the version it did not publish (failed)."""

    name = "Validation page"


class PredictionsPageLink(_PageLink):
    """``score``: the predictions it published (or found already published)."""

    name = "Predictions page"


def remember(link: type[_PageLink], url: str) -> None:
    """Push ``url`` for ``link`` from inside a running task (its button then opens it);
    called outside a task (a test calling the task's function), there is no button to fill."""
    from airflow.sdk import get_current_context

    try:
        ti = get_current_context()["ti"]
    except RuntimeError:  # "no context was found": not running as an Airflow task
        return
    ti.xcom_push(key=link().xcom_key, value=url)


@contextmanager
def failed_validation(dataset: str) -> Iterator[None]:
    """Around ``build``: a window that fails its validation leaves its results under the
    version it did not publish; say where they open (the log and the task's "Validation
    page" button), then fail as before."""
    from etl.errors import ValidationFailed

    try:
        yield
    except ValidationFailed as exc:
        if exc.results_uri:
            version = exc.results_uri.rstrip("/").rsplit("/", 2)[-2]
            page = validation_url(dataset, version)
            remember(ValidationPageLink, page)
            import logging

            logging.getLogger("airflow.task").error(
                "Validation page (not published): %s", page)
        raise


def attach(task_output: Any, *links: _PageLink) -> Any:
    """Give a TaskFlow task's operator these extra links (``@task`` takes none itself)."""
    task_output.operator.operator_extra_links = links
    return task_output


def verdict(validation: Verdict | None) -> str:
    """The manifest's validation summary in one word a downstream DAG can gate on:
    ``passed``, ``passed_with_quarantine`` (rows set aside within the limits), ``failed``
    or ``unknown`` (no summary)."""
    success = validation.success if validation is not None else None
    if success is False:
        return "failed"
    if success is not True:
        return "unknown"
    return "passed_with_quarantine" if validation.quarantined_rows else "passed"


def event_extra(result: PublishedVersion, manifest: Manifest, page: str) -> dict[str, Any]:
    """The dataset Asset event's ``extra``: what a consumer needs without reading storage."""
    validation = manifest.verdict
    return {"version_uri": result.version_uri, "version": result.version,
            "version_page": page, "verdict": verdict(validation),
            "quarantined_rows": validation.quarantined_rows,
            "evaluated_rows": validation.evaluated_rows}


def warn_drift(dataset: str, manifest: Manifest, page: str) -> None:
    """The drift WARNING again, now with the page that shows it (the build's cannot link:
    the version is not published yet when it is logged)."""
    import logging

    drift = manifest.verdict.drift
    said = drift.words() if drift is not None else ""
    if said:
        logging.getLogger("airflow.task").warning(
            "drift %s: %s, against %s; see %s", dataset, said, drift.against, page)
