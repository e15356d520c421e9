"""A fault-injecting HTTP proxy on loopback, for putting storage errors in front of the GCS emulator.

Each request is either passed through unchanged or, drawn from a seeded RNG, answered with a
429 or 503 or cut off (the connection closed with no response), until the fault budget is
spent. ``after`` lets the first N requests through untouched (faults then hit mid-run), and
``budget=None`` never stops faulting (a store that stays down). Counters say what happened,
and keep each request's method and path. ``NO_FAULTS`` makes it a counting proxy (the bench
counts a run's requests with it), and ``delay_s`` adds latency to every request passed on.

Run by hand: ``python -m tests.support.faultproxy --upstream http://127.0.0.1:9023 --seed 1``.
"""

from __future__ import annotations

import argparse
import http.client
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Self
from urllib.parse import urlsplit

from tests.support.loopback import LoopbackServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "content-length", "host"}


@dataclass(frozen=True)
class FaultPlan:
    """What to break: probabilities per request, the RNG seed and how many faults in all."""

    p_429: float = 0.1
    p_503: float = 0.1
    p_drop: float = 0.05
    seed: int = 0
    budget: int | None = 20
    after: int = 0
    delay_s: float = 0.0


NO_FAULTS = FaultPlan(p_429=0.0, p_503=0.0, p_drop=0.0, budget=0)


@dataclass
class Counters:
    requests: int = 0
    passed: int = 0
    faults: dict[str, int] = field(default_factory=lambda: {"429": 0, "503": 0, "drop": 0})
    injected: list[tuple[float, str, str]] = field(default_factory=list)  # (time, fault, request)
    seen: list[str] = field(default_factory=list)  # "METHOD /path?query", in arrival order

    @property
    def total_faults(self) -> int:
        return sum(self.faults.values())


class FaultProxy:
    """Forward to ``upstream`` (``http://host:port``), injecting faults per ``plan``."""

    def __init__(self, upstream: str, plan: FaultPlan = FaultPlan()) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.plan, self.counters = plan, Counters()
        self._rng, self._lock = random.Random(plan.seed), threading.Lock()
        self._server: LoopbackServer | None = None
        self.endpoint = ""

    def decide(self, request: str = "") -> str | None:
        """The fault for ``request`` (None: pass it); thread-safe, seeded."""
        with self._lock:
            self.counters.requests += 1
            self.counters.seen.append(request)
            plan, draw = self.plan, self._rng.random()
            spent = plan.budget is not None and self.counters.total_faults >= plan.budget
            if self.counters.requests <= plan.after or spent:
                fault = None
            elif draw < plan.p_429:
                fault = "429"
            elif draw < plan.p_429 + plan.p_503:
                fault = "503"
            elif draw < plan.p_429 + plan.p_503 + plan.p_drop:
                fault = "drop"
            else:
                fault = None
            if fault:
                self.counters.faults[fault] += 1
                self.counters.injected.append((time.monotonic(), fault, request))
            else:
                self.counters.passed += 1
            return fault

    def start(self) -> Self:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet: tests read counters
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = proxy.decide(f"{self.command} {self.path}")
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault:
                    payload = (f'{{"error": {{"code": {fault}, "message": "injected"}}}}'
                               .encode())
                    self.send_response(int(fault))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if proxy.plan.delay_s:
                    time.sleep(proxy.plan.delay_s)
                self._forward(body)

            def _forward(self, body: bytes) -> None:
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in HOP_BY_HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self._server = LoopbackServer(Handler)
        self.endpoint = self._server.url
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=20)
    ns = ap.parse_args()
    with FaultProxy(ns.upstream, FaultPlan(seed=ns.seed, budget=ns.budget)) as p:
        print(p.endpoint, flush=True)
        threading.Event().wait()
