"""Checks of `make compose-test` against the running compose stack (run by run.sh, stdlib only).

``context``: the build context the classic builder sends holds only what docker/Dockerfile
copies. ``emulator``: the compose emulator refuses a second create-if-absent, as GCS does.
``gpu-config``: the GPU worker's definition (it cannot run here) routes the gpu queue.
``e2e``: etl_<name> over REST, a Celery worker killed mid-task and the retry, the Asset-triggered
train_<name> on the gpu-queue worker, the version in the emulator's bucket, the UI plugin's pages.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from stack import Api, Bucket, say

IGNORED_BY_BOTH = {".dockerignore", "docker/Dockerfile"}  # sent whatever the filter says
WAIT_ETL_S, WAIT_TRAIN_S = 900, 600


def check_context(src: Path, image: str) -> None:
    """Send `src` to the classic builder (which reads only the root .dockerignore) and list it."""
    copies = re.findall(r"^COPY\s+(?:--\S+\s+)*(.+?)\s+\S+$",
                        (src / "docker" / "Dockerfile").read_text(), re.MULTILINE)
    allowed = [p for line in copies for p in line.split()]
    probe = f"FROM {image}\nCOPY . /ctx\n"
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    tag = "flightpipe-context-probe:compose-test"
    subprocess.run(["docker", "build", "-q", "-t", tag, "-f", "-", str(src)], input=probe,
                   text=True, env=env, check=True, capture_output=True)
    try:
        listing = subprocess.run(["docker", "run", "--rm", "--entrypoint", "find", tag, "/ctx",
                                  "-type", "f", "-printf", "%P\\n"], text=True, check=True,
                                 capture_output=True).stdout.split()
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
    extra = sorted(f for f in listing if f not in IGNORED_BY_BOTH and not any(
        f == a or (a.endswith("/") and f.startswith(a)) for a in allowed))
    cached = [f for f in listing if "__pycache__" in f or f.endswith(".pyc")]
    if extra or cached or not listing:
        raise SystemExit(f"build context holds {len(extra) + len(cached)} file(s) the image never "
                         f"copies (.dockerignore not applied?): {(extra + cached)[:8]}")
    say(f"build context: {len(listing)} files, only what docker/Dockerfile copies")


def check_emulator(gcs: str, bucket: str) -> None:
    """The emulator the stack runs answers 412 to a second ``ifGenerationMatch=0`` upload."""
    name = f"_compose_test/precondition-{os.getpid()}"
    codes = [Bucket(gcs, bucket).create_if_absent(name, b"x") for _ in range(2)]
    if codes != [200, 412]:
        raise SystemExit(f"gcs-emulator ignores ifGenerationMatch (two creates of one object "
                         f"answered {codes}, GCS answers [200, 412]): publishing cannot be trusted")
    say("gcs-emulator enforces ifGenerationMatch (second create: 412)")


def check_gpu_config(path: Path) -> None:
    """The real GPU worker, as `docker compose config` resolves it, routes the gpu queue."""
    svc = json.loads(path.read_text())["services"]["airflow-worker-gpu"]
    cmd = svc["command"]
    queues = cmd[cmd.index("--queues") + 1] if "--queues" in cmd else ""
    devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    problems = [p for p, bad in (
        (f"consumes queues {queues!r}, not 'gpu'", queues != "gpu"),
        ("reserves no NVIDIA GPU", not any(d.get("driver") == "nvidia" for d in devices)),
        ("is not built from the gpu target", svc.get("build", {}).get("target") != "gpu"),
    ) if bad]
    if problems:
        raise SystemExit("airflow-worker-gpu " + "; ".join(problems))
    say("airflow-worker-gpu (config only): queue gpu, NVIDIA reservation, target gpu")


def _kill_worker_during(api: Api, dag: str, run_id: str, task: str, compose: list[str]) -> None:
    """SIGKILL the default worker's container while `task` runs, then start it again."""
    deadline = time.monotonic() + WAIT_ETL_S
    while time.monotonic() < deadline:
        states = api.task_states(dag, run_id)
        if states.get(task) == "running":
            subprocess.run([*compose, "kill", "-s", "SIGKILL", "airflow-worker"], check=True,
                           capture_output=True)
            say(f"killed the airflow-worker container while {task} (try 1) was running")
            subprocess.run([*compose, "start", "airflow-worker"], check=True, capture_output=True)
            return
        if states.get(task) in ("success", "failed") or api.run_state(dag, run_id) == "failed":
            raise SystemExit(f"{task} ended ({states.get(task)}) before it could be killed")
        time.sleep(0.3)
    raise SystemExit(f"{task} never ran")


def _container_hostname(compose: list[str], service: str) -> str:
    out = subprocess.run([*compose, "ps", "-q", service], check=True, capture_output=True,
                         text=True).stdout.split()
    return out[0][:12] if out else ""


def run_e2e(ns: argparse.Namespace) -> None:
    """ETL with a killed worker and its retry, then the Asset-triggered training, then storage."""
    compose = shlex.split(os.environ["CT_COMPOSE_CMD"])
    api = Api(ns.api, os.environ["CT_PASSWORD"])
    etl, train = f"etl_{ns.dataset}", f"train_{ns.dataset}"
    api.wait_ready([etl, train])
    for dag in (etl, train):
        api.unpause(dag)
    conf = {"interval_end": ns.interval_end, "validation_mode": "quarantine"}
    run_id = api.trigger(etl, conf)
    say(f"triggered {etl} over REST: run {run_id}")
    t0 = time.monotonic()
    _kill_worker_during(api, etl, run_id, ns.kill_during, compose)
    api.wait_success(etl, run_id, WAIT_ETL_S)
    tries = api.task_instance(etl, run_id, ns.kill_during)["try_number"]
    if tries < 2:
        raise SystemExit(f"{ns.kill_during} succeeded at try {tries}: the kill missed it")
    say(f"{etl} succeeded in {time.monotonic() - t0:.0f} s; {ns.kill_during} completed at try "
        f"{tries} after the kill")
    published = api.xcom(etl, run_id, "publish")
    train_run = api.wait_asset_triggered(train, 120)
    say(f"the Asset event started {train} (run {train_run})")
    api.wait_success(train, train_run, WAIT_TRAIN_S)
    ti = api.task_instance(train, train_run, "train")
    standin = _container_hostname(compose, "airflow-worker-gpu-standin")
    if ti["queue"] != "gpu" or ti["hostname"] != standin:
        raise SystemExit(f"train ran on {ti['hostname']} (queue {ti['queue']}), not on the "
                         f"gpu-queue stand-in {standin}")
    say(f"{train} succeeded; train ran on the gpu queue's CPU stand-in worker ({standin})")
    _check_storage(ns, api, published, api.xcom(train, train_run, "train"))


def _check_storage(ns: argparse.Namespace, api: Api, published: dict, trained: dict) -> None:
    """One complete version in the bucket, its shards' counts, metrics.json, the UI's pages."""
    bucket = Bucket(ns.gcs, ns.bucket)
    version = published["version"]
    counts = bucket.check_one_version(f"{ns.prefix}/datasets/{ns.dataset}", version)
    say(f"bucket: one version {version}, manifest + {counts['shards']} shards, "
        f"{counts['records']} records counted in the shards = manifest; no temp objects")
    model = trained["model_uri"].removeprefix(f"gs://{ns.bucket}/")
    metrics = json.loads(bucket.read(f"{model}/metrics.json"))
    if trained["version"] != version or not metrics:
        raise SystemExit(f"model {trained} is not of version {version}, or metrics are empty")
    say(f"model metrics.json: {model}/metrics.json ({len(metrics)} keys)")
    for page in (f"/pipeline/datasets/{ns.dataset}",
                 f"/pipeline/datasets/{ns.dataset}/versions/{version}"):
        html = api.page(page)
        if version not in html:
            raise SystemExit(f"UI page {page} does not name version {version}")
        say(f"UI plugin page {page}: 200, names {version}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("context")
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--image", required=True)
    p = sub.add_parser("emulator")
    p.add_argument("--gcs", required=True)
    p.add_argument("--bucket", required=True)
    p = sub.add_parser("gpu-config")
    p.add_argument("config", type=Path)
    p = sub.add_parser("e2e")
    p.add_argument("--api", required=True)
    p.add_argument("--gcs", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--dataset", default="wine")
    p.add_argument("--interval-end", default="2026-01-01T00:00:00+00:00")
    p.add_argument("--kill-during", default="build")
    ns = parser.parse_args(argv)
    if ns.command == "context":
        check_context(ns.src, ns.image)
    elif ns.command == "emulator":
        check_emulator(ns.gcs, ns.bucket)
    elif ns.command == "gpu-config":
        check_gpu_config(ns.config)
    else:
        run_e2e(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
