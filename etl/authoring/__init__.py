"""Writing and checking specs: ``python -m etl spec init`` drafts one from a sample of raw data,
``python -m etl spec check`` validates a spec and its GX suite without running the ETL.

A layer of its own beside ``etl.pipeline`` (pyproject.toml's contract): it reads raw files
(``etl.sources``) and loads GX suites (``etl.validation``), which ``etl.spec`` may not import.
Modules: ``profile`` (what a sample of columns holds), ``draft`` (spec.yaml and
expectations.json from a profile), ``check`` (spec + suite checks), ``cli`` (the commands).
"""
