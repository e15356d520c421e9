"""Writing and checking specs: ``python -m etl spec init`` drafts one from every row of a raw
source (or a uniform sample over a byte budget), ``python -m etl spec check`` validates a spec
and its GX suite without running the ETL.

A layer of its own beside ``etl.pipeline`` (pyproject.toml's contract): it reads raw files
(``etl.kinds.tabular.read``) and loads GX suites (``etl.validation``), which ``etl.spec`` may not import.
Modules: ``partitions`` (the files a source names, their gaps), ``scan`` (which rows are read,
on Dask), ``profile`` (mergeable partial profiles), ``columns`` (types, null tokens, the key),
``fractions`` (split shares), ``sections`` (label, features, columns, split), ``suite``
and ``draft`` (expectations.json and spec.yaml),
``render`` (writing them), ``check`` (spec + suite checks), ``cli`` (the commands).

The draft entry point, for scripts and the bench::

    from etl.authoring import DraftOptions, draft_spec, write_draft
    draft = draft_spec(DraftOptions(name="t", source="raw/t/t.csv", root=root, label="y"))
    write_draft(draft, out_dir)

Imported lazily, so ``python -m etl`` does not load pandas for other commands.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_BUDGET_BYTES", "DraftOptions", "draft_spec", "write_draft"]

# Raw bytes ``spec init`` profiles whole; beyond, a uniform sample (here: ``--help`` stays light).
DEFAULT_BUDGET_BYTES = 256 * 2**20


def __getattr__(name: str) -> Any:
    if name in ("DraftOptions", "draft_spec"):
        from etl.authoring import draft

        return getattr(draft, name)
    if name == "write_draft":
        from etl.authoring.render import write_draft

        return write_draft
    raise AttributeError(name)
