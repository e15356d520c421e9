"""Clients `make compose-test` uses from the host: Airflow's REST API and the emulator's bucket.

Standard library only, so the check needs nothing the stack does not already run. The bucket
is read through the GCS JSON API the emulator publishes on loopback, the way any client would.
"""

from __future__ import annotations

import gzip
import json
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

RETRY_ON = (OSError, ValueError, KeyError)  # api-server still starting, DAG not parsed yet
CALL_ATTEMPTS, CALL_TIMEOUT_S = 5, 60


def say(msg: str) -> None:
    print(f"compose-test:   {msg}", flush=True)


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float, every_s: float = 2.0) -> Any:
    """Poll until `probe` returns something truthy; its exceptions count as 'not yet'."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
        except RETRY_ON as exc:
            last = exc
        time.sleep(every_s)
    raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")


class Api:
    """Airflow's REST API v2 with a JWT from /auth/token, as a user's script would call it."""

    def __init__(self, base: str, password: str) -> None:
        self.base, self.password, self.token = base.rstrip("/"), password, ""

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """One request; a timeout, refused connection or 5xx is retried (a loaded 2-core host)."""
        req = urllib.request.Request(f"{self.base}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for attempt in range(CALL_ATTEMPTS):
            try:
                with urllib.request.urlopen(req, timeout=CALL_TIMEOUT_S) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as err:
                if err.code < 500 or attempt == CALL_ATTEMPTS - 1:
                    return err.code, err.read()
            except OSError:
                if attempt == CALL_ATTEMPTS - 1:
                    raise
            time.sleep(2 * (attempt + 1))
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        status, data = self.call(method, path, body)
        if status not in ok:
            raise SystemExit(f"{method} {path}: HTTP {status}: {data[:500]!r}")
        return json.loads(data or b"null")

    def wait_ready(self, dags: list[str]) -> None:
        """Log in, then wait until the dag-processor has parsed `dags` without import errors."""
        login = {"username": "admin", "password": self.password}
        self.token = wait_for("a login token", lambda: self.json(
            "POST", "/auth/token", login, ok=(200, 201))["access_token"], 180)

        def parsed() -> bool:
            errors = self.json("GET", "/api/v2/importErrors")["import_errors"]
            if errors:
                raise SystemExit(f"DAG import errors: {errors}")
            return all(self.call("GET", f"/api/v2/dags/{d}")[0] == 200 for d in dags)

        wait_for(f"DAGs {dags} parsed", parsed, 300)

    def unpause(self, dag: str) -> None:
        self.json("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})

    def trigger(self, dag: str, conf: dict) -> str:
        run = self.json("POST", f"/api/v2/dags/{dag}/dagRuns", {"logical_date": None, "conf": conf})
        return run["dag_run_id"]

    def run_state(self, dag: str, run_id: str) -> str:
        return self.json("GET", f"/api/v2/dags/{dag}/dagRuns/{quote(run_id)}")["state"]

    def task_instances(self, dag: str, run_id: str) -> list[dict]:
        path = f"/api/v2/dags/{dag}/dagRuns/{quote(run_id)}/taskInstances"
        return self.json("GET", path)["task_instances"]

    def task_states(self, dag: str, run_id: str) -> dict[str, str]:
        return {ti["task_id"]: ti["state"] for ti in self.task_instances(dag, run_id)}

    def task_instance(self, dag: str, run_id: str, task: str) -> dict:
        return self.json("GET", f"/api/v2/dags/{dag}/dagRuns/{quote(run_id)}/taskInstances/{task}")

    def xcom(self, dag: str, run_id: str, task: str) -> Any:
        path = f"/api/v2/dags/{dag}/dagRuns/{quote(run_id)}/taskInstances/{task}/xcomEntries/return_value"
        return self.json("GET", path)["value"]

    def failure_logs(self, dag: str, run_id: str) -> str:
        out = []
        for ti in self.task_instances(dag, run_id):
            if ti["state"] in ("failed", "upstream_failed", "up_for_retry"):
                path = (f"/api/v2/dags/{dag}/dagRuns/{quote(run_id)}/taskInstances/"
                        f"{ti['task_id']}/logs/{max(ti['try_number'], 1)}")
                _, data = self.call("GET", path)
                out.append(f"--- {ti['task_id']} ({ti['state']}): {data[-3000:]!r}")
        return "\n".join(out)

    def wait_success(self, dag: str, run_id: str, timeout_s: float) -> None:
        def done() -> bool:
            state = self.run_state(dag, run_id)
            if state == "failed":
                raise SystemExit(f"{dag} run {run_id} failed: {self.task_states(dag, run_id)}\n"
                                 f"{self.failure_logs(dag, run_id)}")
            return state == "success"

        wait_for(f"{dag} run {run_id} ({self.task_states(dag, run_id)} at start)", done, timeout_s)

    def wait_asset_triggered(self, dag: str, timeout_s: float) -> str:
        def run() -> str:
            runs = self.json("GET", f"/api/v2/dags/{dag}/dagRuns")["dag_runs"]
            return next((r["dag_run_id"] for r in runs if r["run_type"] == "asset_triggered"), "")

        return wait_for(f"an Asset-triggered {dag} run", run, timeout_s)

    def page(self, path: str) -> str:
        status, data = self.call("GET", path)
        if status != 200:
            raise SystemExit(f"GET {path}: HTTP {status}")
        return data.decode()


def tfrecord_count(data: bytes) -> int:
    """Records in a TFRecord file, by its framing (length, CRC, payload, CRC)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    count = pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + 4 + length + 4
        count += 1
    if pos != len(data):
        raise ValueError("truncated TFRecord file")
    return count


class Bucket:
    """Read-only view of one bucket through the emulator's GCS JSON API."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.base, self.bucket = endpoint.rstrip("/"), bucket

    def list(self, prefix: str) -> dict[str, int]:
        """Object name -> size, every page."""
        out, token = {}, ""
        while True:
            url = (f"{self.base}/storage/v1/b/{self.bucket}/o?prefix={quote(prefix)}"
                   + (f"&pageToken={quote(token)}" if token else ""))
            with urllib.request.urlopen(url, timeout=30) as resp:
                page = json.loads(resp.read())
            out.update({o["name"]: int(o["size"]) for o in page.get("items", [])})
            token = page.get("nextPageToken", "")
            if not token:
                return out

    def read(self, name: str) -> bytes:
        url = f"{self.base}/storage/v1/b/{self.bucket}/o/{quote(name, safe='')}?alt=media"
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.read()

    def create_if_absent(self, name: str, data: bytes) -> int:
        """HTTP status of a media upload with ``ifGenerationMatch=0`` (create only if absent)."""
        url = (f"{self.base}/upload/storage/v1/b/{self.bucket}/o?uploadType=media"
               f"&name={quote(name, safe='')}&ifGenerationMatch=0")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"),
                                        timeout=30) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code

    def only_version(self, dataset_prefix: str) -> str:
        """The one version folder under the dataset (besides ``segments/``)."""
        dirs = _folders(dataset_prefix, self.list(f"{dataset_prefix}/")) - {"segments"}
        if len(dirs) != 1:
            raise SystemExit(f"expected one version under {dataset_prefix}, found {sorted(dirs)}")
        return dirs.pop()

    def check_one_version(self, dataset_prefix: str, version: str) -> dict[str, int]:
        """Exactly `version` under the dataset, complete: manifest, every shard of every
        segment it lists (and no other segment), their counts, no leftovers of a writer."""
        objects = self.list(f"{dataset_prefix}/")
        dirs = _folders(dataset_prefix, objects)
        if dirs - {"segments"} != {version}:
            raise SystemExit(f"expected one version {version} under {dataset_prefix}, found {dirs}")
        vdir = f"{dataset_prefix}/{version}/"
        manifest = json.loads(self.read(f"{vdir}manifest.json"))
        listed = {(f"segments/{s['segment']}/" if s.get("segment") else f"{version}/")
                  + s["file"]: s for split in manifest["splits"].values() for s in split["shards"]}
        base = f"{dataset_prefix}/"
        stored = {n[len(base):]: size for n, size in objects.items() if ".tfrecord" in n}
        unfinished = {n.rsplit("/", 2)[-2] for n in objects if n.startswith(f"{base}segments/")
                      } - {n.rsplit("/", 2)[-2] for n in objects if n.endswith("/segment.json")}
        leftovers = [n for n in objects if ".tmp-" in n or n.endswith("/_WRITER")]
        if set(stored) != set(listed) or leftovers or unfinished:
            raise SystemExit(f"shards stored {sorted(stored)} != manifest {sorted(listed)}, or "
                             f"leftovers of a killed writer: {leftovers}, unfinished segments: "
                             f"{sorted(unfinished)}")
        records = 0
        for name, shard in listed.items():
            n = tfrecord_count(self.read(base + name))
            if n != shard["records"] or stored[name] != shard["bytes"]:
                raise SystemExit(f"{name}: {n} records / {stored[name]} bytes stored, manifest "
                                 f"says {shard['records']} / {shard['bytes']}")
            records += n
        summary = manifest["validation"]
        if records + summary.get("quarantined_rows", 0) != summary["evaluated_rows"]:
            raise SystemExit(f"{records} records + quarantined != {summary['evaluated_rows']} rows")
        return {"shards": len(listed), "records": records}


def _folders(prefix: str, objects: dict[str, int]) -> set[str]:
    """The first path level of the objects under ``prefix/`` that lie in a folder there."""
    rest = [n[len(prefix) + 1:] for n in objects]
    return {r.split("/")[0] for r in rest if "/" in r}
