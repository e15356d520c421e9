"""A GCS JSON-API emulator that honours ``ifGenerationMatch``, for machines without a bucket.

The stock gcp-storage-emulator ignores generation preconditions, and our publish protocol
relies on them (a manifest is created only if absent; real GCS enforces that), so
``etl.storage`` refuses an endpoint that ignores them. This wraps the emulator's upload and
delete handlers to answer 412 the way GCS does when the object's generation differs
(``0`` = "must not exist"), for media, multipart and resumable uploads and for deletes. The
emulator serves one request at a time, so check-then-act inside it is atomic. Everything else
is the emulator as shipped. The compose ``gcs-emulator`` service and the tests both run this.

    python -m etl.storage.emulator --port 9023 --bucket dev [--data-dir /data]

A leaf module: it imports nothing from ``etl``, so importing it stays cheap and layer-free.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

READY = "GCS-EMULATOR-READY"
"""First line on stdout once the server listens: ``GCS-EMULATOR-READY <port>``."""

_PRECONDITION_FAILED = {
    "error": {"code": 412, "message": "conditionNotMet", "errors": [{"reason": "conditionNotMet"}]}
}


def _object_name(request: Any, storage: Any) -> tuple[str, str] | None:
    """(bucket, object) an upload or delete request targets, if it can be told."""
    query, params = request.query, request.params or {}
    if "upload_id" in query:
        try:
            obj = storage.get_resumable_file_obj(query["upload_id"][0])
        except Exception:  # noqa: BLE001 - unknown upload: let the handler answer 404
            return None
        return obj["bucket"], obj["name"]
    if "object_id" in params:
        return params["bucket_name"], params["object_id"]
    if "name" in query:
        return params["bucket_name"], query["name"][0]
    data = request.data
    if isinstance(data, dict):
        meta = data.get("meta") if "meta" in data else data
        if isinstance(meta, dict) and meta.get("name"):
            return params["bucket_name"], meta["name"]
    return None


def _with_generation_precondition(handler: Callable) -> Callable:
    """Wrap an emulator handler so ``ifGenerationMatch`` is enforced like GCS does."""

    def wrapped(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        wanted = request.query.get("ifGenerationMatch")
        target = _object_name(request, storage) if wanted else None
        if wanted and target:
            try:
                current = str(storage.get_file_obj(*target)["generation"])
            except Exception:  # noqa: BLE001 - emulator raises its own NotFound
                current = "0"
            if current != wanted[0]:
                response.status = HTTPStatus.PRECONDITION_FAILED
                response.json(_PRECONDITION_FAILED)
                return None
        return handler(request, response, storage, *args, **kwargs)

    return wrapped


def install_preconditions() -> None:
    """Patch the emulator's router (once per process) so uploads and deletes check generations."""
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    if getattr(objects, "_flightpipe_preconditions", False):
        return
    wrapped = {
        f: _with_generation_precondition(f)
        for f in (objects.insert, objects.upload_partial, objects.delete)
    }
    server.HANDLERS = tuple(
        (regex, {m: wrapped.get(f, f) for m, f in methods.items()})
        for regex, methods in server.HANDLERS
    )
    objects.insert = wrapped[objects.insert]  # the router's fallback for odd upload paths
    objects._flightpipe_preconditions = True


def _check_writable(data_dir: Path) -> None:
    """Fail with the fix in the message, not a PermissionError from deep in the emulator."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if not os.access(data_dir, os.W_OK | os.X_OK):
        st = data_dir.stat()
        raise SystemExit(
            f"GCS emulator: {data_dir} (owner uid {st.st_uid}) is not writable by uid "
            f"{os.getuid()}; give the volume to this user (docker/Dockerfile creates /data so)"
        )


def serve(
    host: str,
    port: int,
    buckets: Sequence[str],
    *,
    data_dir: Path | None = None,
    preconditions: bool = True,
    stop: threading.Event | None = None,
) -> None:
    """Serve until ``stop`` is set: objects in memory, or under ``data_dir`` if given.

    Prints ``READY <port>`` once listening, so a parent that asked for port 0 learns the port.
    """
    from gcp_storage_emulator.handlers.buckets import create_bucket
    from gcp_storage_emulator.server import create_server

    if preconditions:
        install_preconditions()
    if data_dir is not None:
        _check_writable(data_dir)
    srv = create_server(host, port, in_memory=data_dir is None,
                        data_dir=str(data_dir) if data_dir is not None else None)
    for name in buckets:
        create_bucket(name, srv._storage)  # idempotent: a persisted bucket is kept
    srv.start()
    try:
        print(f"{READY} {srv._api._httpd.server_address[1]}", flush=True)
        (stop or threading.Event()).wait()
    finally:
        srv.stop()


def _stop_event(on_stdin_eof: bool) -> threading.Event:
    """Set on SIGTERM/SIGINT (compose stop) and, if asked, when stdin closes (parent gone)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if on_stdin_eof:
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    return stop


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: the compose service and the test fixture both start the server here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9023, help="0: any free port (printed)")
    parser.add_argument("--bucket", action="append", default=[], help="create it (repeatable)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep objects on disk here (default: in memory)")
    parser.add_argument("--stock", action="store_true",
                        help="do not enforce ifGenerationMatch (the emulator as shipped)")
    parser.add_argument("--stop-on-stdin-eof", action="store_true",
                        help="exit when stdin closes, so a parent's death stops the server")
    ns = parser.parse_args(argv)
    serve(ns.host, ns.port, ns.bucket, data_dir=ns.data_dir, preconditions=not ns.stock,
          stop=_stop_event(ns.stop_on_stdin_eof))
    return 0


if __name__ == "__main__":
    sys.exit(main())
