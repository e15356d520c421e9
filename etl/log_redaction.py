"""Keep credentials out of google-auth's DEBUG request logs, in every process that uses etl.

google-auth (2.6x) logs each token request with its body in ``extra={"httpRequest": ...}``.
It hashes access and refresh tokens there but not ``assertion``: the JWT signed with the
service-account key, which anyone can exchange for access tokens until it expires. Plain
formatters drop ``extra`` fields; structured ones (google's own JSON logging scope, structlog)
print them. A filter on the loggers that write these records replaces such values first.
"""

from __future__ import annotations

import logging
from typing import Any

REDACTED = "<redacted>"
SECRET_KEYS = frozenset({"assertion", "authorization", "private_key", "client_secret",
                         "refresh_token", "access_token", "id_token", "subject_token"})
RECORD_FIELDS = ("httpRequest", "httpResponse")  # where google-auth puts bodies and headers
GOOGLE_AUTH_TRANSPORT_LOGGERS = (
    "google.auth.transport.requests",
    "google.auth.transport.urllib3",
    "google.auth.transport._http_client",
    "google.auth.transport._aiohttp_requests",
    "google.auth.aio.transport.aiohttp",
    "google.auth.aio.transport.sessions",
)


def scrub(value: Any) -> Any:
    """A copy of ``value`` with secret-named keys' values replaced, at any depth."""
    if isinstance(value, dict):
        return {k: REDACTED if str(k).lower() in SECRET_KEYS and v else scrub(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(v) for v in value)
    return value


class CredentialFilter(logging.Filter):
    """Scrubs the ``httpRequest``/``httpResponse`` fields of a record; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name in RECORD_FIELDS:
            if name in record.__dict__:
                setattr(record, name, scrub(record.__dict__[name]))
        return True


_FILTER = CredentialFilter()


def install() -> None:
    """Attach the filter to google-auth's transport loggers (idempotent, no imports)."""
    for name in GOOGLE_AUTH_TRANSPORT_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
