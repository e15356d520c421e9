"""The checks `make compose-test` runs (docker/compose-test/check.py, stack.py), without Docker.

The end-to-end run needs a Docker engine and ~15 minutes; these pin the pure parts it relies
on: the GPU worker's resolved definition, TFRecord counting, and the one-version bucket check
against a real emulator.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
import yaml

from etl.write.shards import frame
from tests.docker.test_compose import SERVICES, interpolate, walk_strings
from tests.support.gcs import GcsEmulator

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docker" / "compose-test"))
import check
import stack


def _resolved_gpu_worker() -> dict:
    """airflow-worker-gpu as `docker compose config` prints it: variables substituted."""
    svc = json.loads(json.dumps(SERVICES["airflow-worker-gpu"]))
    svc["command"] = [interpolate(c, {}) for c in svc["command"]]
    return svc


def test_gpu_config_check_passes_the_compose_file_and_names_what_breaks(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    svc = _resolved_gpu_worker()
    path.write_text(json.dumps({"services": {"airflow-worker-gpu": svc}}))
    check.check_gpu_config(path)
    svc["command"][svc["command"].index("--queues") + 1] = "default"
    del svc["deploy"]
    path.write_text(json.dumps({"services": {"airflow-worker-gpu": svc}}))
    with pytest.raises(SystemExit, match="consumes queues 'default'.*reserves no NVIDIA GPU"):
        check.check_gpu_config(path)


def test_override_moves_the_gpu_worker_out_and_a_cpu_worker_onto_the_gpu_queue() -> None:
    override = yaml.safe_load((Path(check.__file__).parent / "gpu-on-cpu.yml").read_text())
    services = override["services"]
    assert services["airflow-worker-gpu"] == {"profiles": ["gpu"]}
    standin = services["airflow-worker-gpu-standin"]
    assert standin["extends"]["service"] == "airflow-worker" and "deploy" not in standin
    cmd = standin["command"]
    assert cmd[cmd.index("--queues") + 1] == "gpu"
    assert "standin" in cmd[cmd.index("--celery-hostname") + 1]
    assert not any("nvidia" in s for s in walk_strings(standin))


def test_tfrecord_count_reads_plain_and_gzip_framing() -> None:
    data = b"".join(frame(f"record {i}".encode()) for i in range(7))
    assert stack.tfrecord_count(data) == 7
    assert stack.tfrecord_count(gzip.compress(data)) == 7
    with pytest.raises(ValueError, match="truncated"):
        stack.tfrecord_count(data[:-3])


@pytest.mark.integration
def test_bucket_check_accepts_one_complete_version_and_refuses_a_stray_one() -> None:
    shard = b"".join(frame(b"x") for _ in range(3))
    manifest = {"splits": {"train": {"shards": [
        {"file": "d-train.tfrecord-00000-of-00001", "records": 3, "bytes": len(shard)}]}},
        "validation": {"evaluated_rows": 4, "quarantined_rows": 1}}
    with GcsEmulator(buckets=("b",)) as emu:
        bucket = stack.Bucket(emu.endpoint, "b")
        for name, data in (("p/datasets/d/v1/d-train.tfrecord-00000-of-00001", shard),
                           ("p/datasets/d/v1/manifest.json", json.dumps(manifest).encode()),
                           ("p/datasets/d/LATEST", b"v1")):
            assert bucket.create_if_absent(name, data) == 200
        assert bucket.create_if_absent("p/datasets/d/LATEST", b"v2") == 412
        assert bucket.check_one_version("p/datasets/d", "v1") == {"shards": 1, "records": 3}
        bucket.create_if_absent("p/datasets/d/v2/d-train.tfrecord-00000-of-00001", shard)
        with pytest.raises(SystemExit, match="expected one version v1"):
            bucket.check_one_version("p/datasets/d", "v1")


@pytest.mark.integration
def test_bucket_check_follows_a_version_into_its_segments_and_refuses_an_unfinished_one(
        ) -> None:
    shard = b"".join(frame(b"x") for _ in range(2))
    manifest = {"splits": {"train": {"shards": [
        {"file": "d-train.tfrecord-00000-of-00001", "records": 2, "bytes": len(shard),
         "segment": "s1"}]}}, "validation": {"evaluated_rows": 2, "quarantined_rows": 0}}
    with GcsEmulator(buckets=("b",)) as emu:
        bucket = stack.Bucket(emu.endpoint, "b")
        for name, data in (("p/datasets/d/segments/s1/d-train.tfrecord-00000-of-00001", shard),
                           ("p/datasets/d/segments/s1/segment.json", b"{}"),
                           ("p/datasets/d/v1/manifest.json", json.dumps(manifest).encode())):
            assert bucket.create_if_absent(name, data) == 200
        assert bucket.check_one_version("p/datasets/d", "v1") == {"shards": 1, "records": 2}
        bucket.create_if_absent("p/datasets/d/segments/s2/d-train.tfrecord-00000-of-00001",
                                shard)  # a killed build's segment: shards, no segment.json
        with pytest.raises(SystemExit, match=r"unfinished segments: \['s2'\]"):
            bucket.check_one_version("p/datasets/d", "v1")
