"""Airflow plugin: the pipeline's datasets, versions and models inside the Airflow UI.

Registers the ``pipeline_ui`` FastAPI app under ``/pipeline`` on the api-server and a
top-level navigation entry that shows it in the Airflow UI (an external view rendered
in an iframe at ``/plugin/pipeline-datasets``). The app requires an authenticated
Airflow user, because Airflow does not authenticate plugin apps by itself.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin
from pipeline_ui import URL_PREFIX, create_app
from pipeline_ui.runs import AirflowRuns

NAV_ROUTE = "pipeline-datasets"


def _base_path() -> str:
    """Path part of [api] base_url, so links work when Airflow is served under a prefix."""
    return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


class PipelineUIPlugin(AirflowPlugin):
    """Datasets -> versions -> version/model pages, read-only, from PIPELINE_STORAGE_ROOT."""

    name = "pipeline_ui"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [{
        "name": "Pipeline datasets",
        "app": create_app(airflow_auth=True, url_prefix=URL_PREFIX, runs=AirflowRuns()),
        "url_prefix": URL_PREFIX,
    }]
    external_views: ClassVar[list[dict[str, Any]]] = [{
        "name": "Datasets",
        "href": f"{_base_path()}{URL_PREFIX}/",
        "url_route": NAV_ROUTE,
        "destination": "nav",
        "nav_top_level": True,
        "icon": f"{_base_path()}{URL_PREFIX}/static/icon.svg",
    }]
