"""Test fixture helper: the product's GCS emulator (``etl.storage.emulator``) in a child process.

One emulator for the tests and the compose service; this only starts it on a free loopback
port and stops it. The child exits when its stdin closes, so a killed test run leaves no server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

from etl.storage.emulator import READY

START_TIMEOUT_S = 30.0


class GcsEmulator:
    """Start/stop the emulator subprocess on a free loopback port.

    Attributes:
        endpoint: ``http://127.0.0.1:<port>``, the value for STORAGE_EMULATOR_HOST.
        log: file receiving the emulator's own log (it logs client disconnects noisily).
    """

    def __init__(
        self,
        buckets: tuple[str, ...] = ("test-bucket",),
        host: str = "127.0.0.1",
        stock: bool = False,
        data_dir: Path | None = None,
    ):
        self.buckets, self.host, self.stock, self.data_dir = buckets, host, stock, data_dir
        self.endpoint = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> Self:
        cmd = [
            sys.executable,
            "-m",
            "etl.storage.emulator",
            "--stop-on-stdin-eof",
            "--host",
            self.host,
            "--port",
            "0",
            *[a for b in self.buckets for a in ("--bucket", b)],
        ]
        cmd += ["--stock"] if self.stock else []
        cmd += ["--data-dir", str(self.data_dir)] if self.data_dir else []
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            prefix="gcs-emulator-", suffix=".log", delete=False
        )
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self._proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not line or not line[0].startswith(READY):
            self.stop()
            raise RuntimeError(f"GCS emulator did not start: {line[:1]!r}; see {self.log.name}")
        self.endpoint = f"http://{self.host}:{int(line[0].split()[1])}"
        return self

    def stop(self) -> None:
        """Stop the server and drop its log."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()
            self._proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, OSError):
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def create_bucket(self, name: str) -> None:
        """Create one more bucket through the JSON API (as a client would)."""
        req = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=test",
            method="POST",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` (for tests that watch another process)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
