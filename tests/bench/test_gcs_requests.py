"""The counting proxy issue 25's GCS figures go through: it passes every request on, logs it,
adds the latency asked for, and the bench sorts the log into kinds."""

from __future__ import annotations

import time
import urllib.request
from http.server import BaseHTTPRequestHandler

from bench.gcs_requests import classify, summarize
from tests.support.faultproxy import NO_FAULTS, FaultProxy
from tests.support.loopback import LoopbackServer


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_POST = do_DELETE = _reply


def _send(url: str, method: str = "GET", data: bytes | None = None) -> bytes:
    req = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def test_no_fault_proxy_passes_and_counts_every_request() -> None:
    upstream = LoopbackServer(_Ok)
    try:
        with FaultProxy(upstream.url, NO_FAULTS) as proxy:
            for i in range(25):
                assert _send(f"{proxy.endpoint}/storage/v1/b/x/o?prefix=p{i}") == b"ok"
            assert _send(f"{proxy.endpoint}/upload/storage/v1/b/x/o?uploadType=media&name=a",
                         "POST", b"data") == b"ok"
            assert proxy.counters.requests == proxy.counters.passed == 26
            assert proxy.counters.total_faults == 0
            assert proxy.counters.seen[-1].startswith("POST /upload/")
    finally:
        upstream.stop()


def test_delay_is_added_to_each_request() -> None:
    from dataclasses import replace

    upstream = LoopbackServer(_Ok)
    try:
        with FaultProxy(upstream.url, replace(NO_FAULTS, delay_s=0.05)) as proxy:
            t0 = time.perf_counter()
            for _ in range(4):
                _send(f"{proxy.endpoint}/storage/v1/b/x/o/a")
            assert time.perf_counter() - t0 >= 0.2
    finally:
        upstream.stop()


def test_requests_are_sorted_into_kinds() -> None:
    seen = ["GET /storage/v1/b/bk/o?prefix=raw%2Fflights%2F&delimiter=%2F",
            "GET /storage/v1/b/bk/o/raw%2Fa.csv",
            "GET /download/storage/v1/b/bk/o/raw%2Fa.csv?alt=media",
            "GET /storage/v1/b/bk/o/raw%2Fa.csv?alt=media",
            "POST /upload/storage/v1/b/bk/o?uploadType=multipart",
            "PUT /upload/storage/v1/b/bk/o?uploadType=resumable&upload_id=1",
            "POST /storage/v1/b/bk/o/a/copyTo/b/bk/o/b",
            "DELETE /storage/v1/b/bk/o/a",
            "POST /batch/storage/v1"]
    assert [classify(r) for r in seen] == ["list", "metadata", "read", "read", "upload",
                                           "upload_part", "copy", "delete", "batch"]
    assert summarize(seen)["objects_written"] == 2
    assert summarize(seen)["requests"] == 9
