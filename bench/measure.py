"""The individual measurements of `make bench`; each returns plain numbers."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def machine() -> dict[str, Any]:
    """Cores, memory and GPU of the machine the figures were taken on."""
    import psutil

    gpus: list[str] = []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cores": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "gpu": gpus or None, "python": platform.python_version(),
            "platform": platform.platform()}


def etl_run(root: str, encoder: str) -> dict[str, Any]:
    """End-to-end ETL of all landed 2013 flights under ``root`` in a child process."""
    cmd = [sys.executable, "-m", "bench.etl_once", "--root", root, "--encoder", encoder]
    proc = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["created"]:
        raise RuntimeError(f"{root}: version already existed, nothing was measured")
    return result


def csv_read(root: str) -> dict[str, float]:
    """pyarrow's multithreaded CSV reader over the landed per-day flight files: the read ceiling."""
    import pyarrow.csv as pacsv

    from etl import storage

    fs, path = storage.get_fs(storage.join(root, "raw", "flights"))
    files = sorted(fs.glob(f"{path}/date=*/flights.csv"))
    t0 = time.perf_counter()
    rows = nbytes = 0
    for f in files:
        with fs.open(f, "rb") as fh:
            table = pacsv.read_csv(fh)
        rows += table.num_rows
        nbytes += fs.size(f)
    wall = time.perf_counter() - t0
    return {"csv_read_rows_per_s": rows / wall, "csv_read_mb_per_s": nbytes / wall / 2**20,
            "csv_rows": rows}


def _decoded_train_frame(version_uri: str):
    """The train split as the flat pandas frame the writer encodes (decoded from the shards)."""
    import pandas as pd
    import tensorflow as tf

    from etl import versions
    from training.data.tabular import compression_type, feature_specs, shard_files

    manifest = versions.read_manifest(version_uri)
    files = shard_files(version_uri, "train", manifest)
    specs = feature_specs(manifest)
    ds = tf.data.TFRecordDataset(files, compression_type=compression_type(manifest))
    ds = ds.batch(65536).map(lambda b: tf.io.parse_example(b, specs))
    columns: dict[str, list[Any]] = {name: [] for name in specs}
    for batch in ds.as_numpy_iterator():
        for name, values in batch.items():
            columns[name].append(values.reshape(len(values), -1)[:, 0])
    import numpy as np

    frame = pd.DataFrame({name: np.concatenate(parts) for name, parts in columns.items()})
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = frame[name].map(bytes.decode)
    return frame, manifest


def serialization(version_uri: str) -> dict[str, float]:
    """Encoders alone on the same rows: tfx-bsl's C++ one, ours (vectorized), the Python loop."""
    from etl.write import encode

    frame, manifest = _decoded_train_frame(version_uri)
    schema = manifest["schema"]
    t0 = time.perf_counter()
    fast = encode.encode_batch(frame, schema)
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = encode.encode_batch_vectorized(frame, schema)
    ours_s = time.perf_counter() - t0
    sample = frame.iloc[: min(len(frame), 50_000)]
    t0 = time.perf_counter()
    slow = encode.encode_batch_python(sample, schema)
    slow_s = time.perf_counter() - t0
    assert len(fast) == len(ours) == len(frame) and len(slow) == len(sample)
    return {"serialize_ceiling_rows_per_s": len(frame) / fast_s,
            "serialize_vectorized_rows_per_s": len(frame) / ours_s,
            "serialize_python_rows_per_s": len(sample) / slow_s, "serialize_rows": len(frame)}


def input_pipeline(version_uri: str) -> dict[str, Any]:
    """training's bench-input: raw-read ceiling, our pipeline, naive pipeline, stall ratio."""
    from training.bench import bench_input

    return bench_input(version_uri)


_PARSE_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from airflow.dag_processing.dagbag import BundleDagBag
t1 = time.perf_counter()
path = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=path, bundle_path=path.parent, bundle_name="dags-folder")
t2 = time.perf_counter()
print(json.dumps({"parse_s": t2 - t1, "errors": {k: str(v)[:500] for k, v in bag.import_errors.items()},
                  "dags": sorted(bag.dag_ids)}))
"""


def dag_parse_times(airflow_home: str) -> dict[str, dict[str, Any]]:
    """Seconds DagBag spends on each DAG file, in a fresh interpreter with Airflow imported."""
    env = dict(os.environ, AIRFLOW_HOME=airflow_home, AIRFLOW__CORE__LOAD_EXAMPLES="False",
               PYTHONPATH=str(REPO))
    results: dict[str, dict[str, Any]] = {}
    for path in sorted((REPO / "dags").glob("*.py")):
        if path.name.startswith("_"):
            continue
        proc = subprocess.run([sys.executable, "-c", _PARSE_SNIPPET, str(path)], check=False,
                              env=env, capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"parsing {path} failed:\n{proc.stderr[-3000:]}")
        results[path.name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results
