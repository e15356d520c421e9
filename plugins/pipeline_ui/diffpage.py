"""The version diff page: ``etl.versions.diff`` rendered, the same result ``etl diff`` prints.

``/datasets/<d>/versions/<v>/diff`` compares ``v`` with the version published just before it
(``?against=<id>`` picks another). Linked from the version page and from each row of the
version list. Its own module, so the routes in ``app`` stay a list of one-screen functions.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from etl.versions.diff import diff_manifests

from .catalog import Catalog, NotFound


def previous_version(newest_first: list[str], version: str) -> str | None:
    """The version published just before ``version`` in a newest-first listing."""
    try:
        i = newest_first.index(version)
    except ValueError:
        return None
    return newest_first[i + 1] if i + 1 < len(newest_first) else None


def install(app: FastAPI, catalog: Catalog, render: Any) -> None:
    """Add the diff route to ``app`` (``render``: the app's template renderer)."""

    @app.get("/datasets/{dataset}/versions/{version}/diff", response_class=HTMLResponse,
             name="version_diff")
    def version_diff(request: Request, dataset: str, version: str,
                     against: str | None = None) -> Response:
        newer = catalog.manifest(dataset, version)  # 404 names an absent version first
        ids, _ = catalog.version_ids(dataset)
        older_id = against or previous_version(ids, version)
        if older_id is None:
            raise NotFound(f"{dataset}/{version} is the oldest version: there is no previous "
                           "version to compare it with")
        result = diff_manifests(catalog.manifest(dataset, older_id), newer)
        return render(request, "diff.html", dataset=dataset, version=version, diff=result,
                      choices=[v for v in ids if v != version])
