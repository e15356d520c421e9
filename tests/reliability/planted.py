"""A planted service account whose every secret really travels, and a capture of every log.

The key is a real RSA key made here; its ``token_uri`` points at ``TokenServer`` on loopback, so
google-auth signs a JWT with it, exchanges that for an access token, and gcsfs sends the token
to the GCS emulator. ``Planted.needles`` are the strings that must never reach a log: the key's
base64 lines, its id, every signed JWT the server received and the access token it issued.
"""

from __future__ import annotations

import json
import logging
import secrets
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Self

from tests.support.loopback import LoopbackServer

# Named so they exist (and are set to DEBUG) before the libraries create them lazily;
# google-auth silences "google" unless someone configured it, which is what we do here.
TOP_LOGGERS = ("airflow", "aiohttp", "asyncio", "distributed", "etl", "fsspec", "gcsfs",
               "google", "google.auth", "requests", "urllib3")


@dataclass
class TokenServer:
    """OAuth token endpoint on loopback: issues ``access_token`` or, if ``reject``, a 400."""

    access_token: str = field(default_factory=lambda: "ya29." + secrets.token_urlsafe(48))
    reject: bool = False
    assertions: list[str] = field(default_factory=list)
    uri: str = ""
    _server: LoopbackServer | None = None

    def start(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # its access log is not ours to test
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                owner.assertions += urllib.parse.parse_qs(body).get("assertion", [])
                if owner.reject:
                    status, reply = 400, {"error": "invalid_grant",
                                          "error_description": "Invalid JWT Signature."}
                else:
                    status, reply = 200, {"access_token": owner.access_token,
                                          "expires_in": 3600, "token_type": "Bearer"}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = LoopbackServer(Handler)
        self.uri = self._server.url + "/token"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@dataclass(frozen=True)
class Planted:
    """A service-account keyfile (as GCP issues them) and the server that honours it."""

    keyfile: dict[str, str]
    server: TokenServer

    @classmethod
    def make(cls, server: TokenServer) -> Planted:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        keyfile = {"type": "service_account", "project_id": "planted-project",
                   "private_key_id": secrets.token_hex(20), "private_key": pem,
                   "client_email": "etl@planted-project.iam.gserviceaccount.com",
                   "client_id": "1" + "".join(secrets.choice("0123456789") for _ in range(20)),
                   "token_uri": server.uri}
        return cls(keyfile, server)

    def connection_env(self) -> str:
        """``AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT`` as a deployment sets it (JSON form)."""
        return json.dumps({"conn_type": "google_cloud_platform",
                           "extra": {"keyfile_dict": json.dumps(self.keyfile)}})

    def needles(self) -> dict[str, str]:
        """What must never appear in any output, by name (for a readable failure)."""
        lines = [ln for ln in self.keyfile["private_key"].splitlines() if "-----" not in ln]
        found = {f"private key line {i}": ln for i, ln in enumerate(lines) if len(ln) >= 32}
        found["private_key_id"] = self.keyfile["private_key_id"]
        found["access token"] = self.server.access_token
        found.update({f"signed JWT {i}": a for i, a in enumerate(self.server.assertions)})
        return found

    def leaks(self, text: str) -> list[str]:
        """Names of the needles found in ``text`` (also with JSON/URL escaping undone)."""
        variants = (text, text.replace("\\n", "\n"), urllib.parse.unquote(text))
        return sorted(name for name, value in self.needles().items()
                      if any(value in v for v in variants))


class _Collect(logging.Handler):
    def __init__(self, out: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.out = out
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        # the formatted line with its traceback, plus every attribute: args and `extra=`
        # fields, which structured (JSON) log handlers print and plain ones do not
        self.out.append(self.format(record) + " " + repr(vars(record)))


@contextmanager
def every_log_at_debug() -> Iterator[list[str]]:
    """Every logger at DEBUG into one list, those that do not propagate to root included."""
    out: list[str] = []
    handler = _Collect(out)
    for name in TOP_LOGGERS:
        logging.getLogger(name)
    loggers = [logging.getLogger(), *(lg for lg in logging.root.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    hooked = [lg for lg in loggers if lg is logging.getLogger() or not lg.propagate]
    for lg in hooked:
        lg.addHandler(handler)
    try:
        yield out
    finally:
        for lg in hooked:
            lg.removeHandler(handler)
        for lg, level, disabled in saved:
            lg.setLevel(level)
            lg.disabled = disabled
