"""Checks of `make compose-test` against the running compose stack (run by run.sh, stdlib only).

``context``: the build context the classic builder sends holds only what docker/Dockerfile
copies. ``emulator``: the compose emulator refuses a second create-if-absent, as GCS does.
``gpu-config``: the GPU worker's definition (it cannot run here) routes the gpu queue.
``e2e``: etl_<name> over REST, a Celery worker killed mid-task and the retry, the Asset-triggered
train_<name> on the gpu-queue worker, the version in the emulator's bucket, the UI plugin's pages.
``dask``: wine's ETL through pipeline-cli twice, into two roots: in the container's own process,
and on the ``dask`` profile's scheduler and workers; the second's tasks ran on the dask-worker
containers, and its version holds the first's records, split by split.
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
INTERVAL_END = "2026-01-01T00:00:00+00:00"  # e2e's run and the dask one: the same window
# Dask tasks the ETL must have run on the cluster: the one that reads the raw files and writes
# the segment's shards (etl.kinds.tabular.window.build_segments).
ETL_DASK_TASKS = ("build_segments",)
PROBE = Path(__file__).with_name("dask_probe.py")


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


def _container_hostnames(compose: list[str], service: str) -> list[str]:
    """The hostnames of `service`'s running containers (Docker's default: the id's first 12)."""
    out = subprocess.run([*compose, "ps", "-q", service], check=True, capture_output=True,
                         text=True).stdout.split()
    return sorted(cid[:12] for cid in out)


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
    gx = published.get("timings", {}).get("gx_import_s")
    if gx != 0.0:
        raise SystemExit(f"build imported Great Expectations itself ({gx} s): the default worker "
                         "did not preload it (its AIRFLOW__CELERY__EXTRA_CELERY_CONFIG imports)")
    say("build found Great Expectations loaded: the default worker preloads it (0.0 s import)")
    train_run = api.wait_asset_triggered(train, 120)
    say(f"the Asset event started {train} (run {train_run})")
    api.wait_success(train, train_run, WAIT_TRAIN_S)
    ti = api.task_instance(train, train_run, "train")
    standin = "".join(_container_hostnames(compose, "airflow-worker-gpu-standin")[:1])
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


def run_dask(ns: argparse.Namespace) -> None:
    """The ETL through pipeline-cli in-process, then with PIPELINE_DASK_ADDRESS naming the dask
    profile's scheduler, each into its own root; where the second's tasks ran; the versions."""
    compose = shlex.split(os.environ["CT_COMPOSE_CMD"])
    reference = _cli_etl(compose, ns, ns.reference_prefix, "")
    candidate = _cli_etl(compose, ns, ns.prefix, ns.scheduler)
    cli = [*compose, "--profile", "tools", "run", "--rm", "--no-deps", "-T", "-i"]
    workers = json.loads(_run_cli([*cli, "pipeline-cli", "python", "-", ns.scheduler,
                                   str(ns.workers)], "the Dask probe", PROBE.read_text()))
    say(check_dask_workers(workers, _container_hostnames(compose, "dask-worker"), ns.workers))
    bucket = Bucket(ns.gcs, ns.bucket)
    manifests = []
    for prefix, version in ((ns.reference_prefix, reference), (ns.prefix, candidate)):
        counts = bucket.check_one_version(f"{prefix}/datasets/{ns.dataset}", version)
        say(f"bucket: {prefix}/datasets/{ns.dataset}/{version}: manifest + {counts['shards']} "
            f"shards, {counts['records']} records; no temp objects")
        manifests.append(json.loads(bucket.read(f"{prefix}/datasets/{ns.dataset}/{version}/"
                                                "manifest.json")))
    say(compare_versions(*manifests))


def _cli_etl(compose: list[str], ns: argparse.Namespace, prefix: str, scheduler: str) -> str:
    """`etl land` + `etl run` of the dataset into gs://<bucket>/<prefix> in a pipeline-cli
    container, PIPELINE_DASK_ADDRESS set to `scheduler` (empty: in-process); the version."""
    root = f"gs://{ns.bucket}/{prefix}"
    etl = (f"python -m etl land --root {root} --dataset {ns.dataset} >&2 && exec python -m etl "
           f"run --root {root} --dataset {ns.dataset} --interval-end {ns.interval_end} --json")
    where = f"on the Dask scheduler {scheduler}" if scheduler else "in-process"
    t0 = time.monotonic()
    out = _run_cli([*compose, "--profile", "tools", "run", "--rm", "--no-deps", "-T", "-i", "-e",
                    f"PIPELINE_DASK_ADDRESS={scheduler}", "pipeline-cli", "bash", "-c", etl],
                   f"etl land + run {where}")
    version = json.loads(out[out.index("{"):])["version"]
    say(f"pipeline-cli: etl {ns.dataset} {where} (PIPELINE_DASK_ADDRESS={scheduler!r}) -> "
        f"{root}: version {version} in {time.monotonic() - t0:.0f} s")
    return version


def _run_cli(cmd: list[str], what: str, stdin: str | None = None) -> str:
    """stdout of a one-off container; its output in the failure when it fails."""
    proc = subprocess.run(cmd, input=stdin or "", text=True, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
                         f"{proc.stdout[-1000:]}")
    return proc.stdout


def check_dask_workers(workers: dict[str, dict], containers: list[str], expected: int) -> str:
    """The probe's answer (dask_probe.py) judged: the scheduler's workers are exactly the
    `expected` dask-worker containers, and the ETL's tasks (ETL_DASK_TASKS) ran on them."""
    hosts = {addr: w["hostname"] for addr, w in workers.items()}
    ran = {addr: sum(w["tasks"].get(t, 0) for t in ETL_DASK_TASKS) for addr, w in workers.items()}
    names = "/".join(ETL_DASK_TASKS)
    problems = []
    if len(containers) != expected:
        problems.append(f"{len(containers)} dask-worker container(s) running, expected {expected}")
    if sorted(hosts.values()) != sorted(containers):
        problems.append(f"the scheduler has {len(workers)} worker(s) on "
                        f"{sorted(set(hosts.values()))}, not one on each dask-worker container "
                        f"{containers}")
    if not sum(ran.values()):
        seen = {hosts[a]: w["tasks"] for a, w in workers.items()}
        problems.append(f"no {names} task ran on any worker of the dask profile (tasks seen: "
                        f"{seen}): the ETL computed elsewhere, e.g. in the client's own "
                        "process (PIPELINE_DASK_ADDRESS not honoured?)")
    if problems:
        raise SystemExit("ETL on the dask profile: " + "; ".join(problems))
    where = ", ".join(f"{hosts[a]}: {n}" for a, n in sorted(ran.items(), key=lambda i: hosts[i[0]]))
    return (f"the ETL's {names} tasks ran on the dask-worker containers ({where}); the "
            f"scheduler's workers are exactly those {len(containers)} containers")


def compare_versions(reference: dict, candidate: dict) -> str:
    """Split by split, the candidate (dask) manifest holds the reference's records: the same
    order-free content hash and record count."""
    splits = sorted(set(reference["splits"]) | set(candidate["splits"]))
    ref = {split: _split_records(reference, split) for split in splits}
    got = {split: _split_records(candidate, split) for split in splits}
    differ = [f"{split}: {ref[split]} in-process vs {got[split]} on Dask"
              for split in splits if ref[split] != got[split]]
    if differ or not splits:
        raise SystemExit(f"version {candidate.get('version')} built on the dask profile differs "
                         f"from {reference.get('version')} built in-process (content hash, "
                         f"records): {'; '.join(differ) or 'no splits'}")
    return (f"version {candidate.get('version')} (dask) = {reference.get('version')} "
            f"(in-process): per-split content hashes equal ("
            + ", ".join(f"{split} {got[split][1]} records" for split in splits) + ")")


def _split_records(manifest: dict, split: str) -> tuple[str, int]:
    """(content hash, records) of one split of a manifest; ('absent', 0) without it."""
    entry = manifest["splits"].get(split) or {}
    return entry.get("content_hash", "absent"), entry.get("num_examples", 0)


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
    p.add_argument("--interval-end", default=INTERVAL_END)
    p.add_argument("--kill-during", default="build")
    p = sub.add_parser("dask")
    p.add_argument("--gcs", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True, help="the dask run's root under the bucket")
    p.add_argument("--reference-prefix", required=True,
                   help="the in-process run's root under the bucket")
    p.add_argument("--dataset", default="wine")
    p.add_argument("--interval-end", default=INTERVAL_END)
    p.add_argument("--scheduler", default="tcp://dask-scheduler:8786")
    p.add_argument("--workers", type=int, required=True, help="dask-worker containers started")
    ns = parser.parse_args(argv)
    if ns.command == "context":
        check_context(ns.src, ns.image)
    elif ns.command == "emulator":
        check_emulator(ns.gcs, ns.bucket)
    elif ns.command == "gpu-config":
        check_gpu_config(ns.config)
    elif ns.command == "dask":
        run_dask(ns)
    else:
        run_e2e(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
