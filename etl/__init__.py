"""ETL package; importing it keeps credentials out of google-auth's DEBUG logs (log_redaction)."""

from __future__ import annotations

from etl import log_redaction as _log_redaction

_log_redaction.install()  # before any etl module talks to GCS, in every process (Dask workers too)
