"""What users would pick instead of this ETL, each in its own environment, run on our data.

Every peer gets a virtualenv under ``bench/.peers/<name>/`` made by ``uv`` from the package
registries -- never the project's ``.venv`` or lock -- and runs a script from
``bench/peers/`` there as a child, measured from outside (wall, CPU of its process tree, peak
RSS). Its output records are counted afterwards with TensorFlow, outside the timing. A peer
that cannot be installed or run is recorded with the installer's or its own error.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from glob import glob
from pathlib import Path
from typing import Any

from bench.proctree import last_json, run_child

REPO = Path(__file__).resolve().parent.parent
ENVS = REPO / "bench" / ".peers"
SCRIPTS = REPO / "bench" / "peers"

# What each peer needs, as resolved on Python 3.11 when this was written. Extras beyond the
# peer itself: tfx-bsl 1.16 imports dill, which apache-beam no longer pulls in; Ray's
# write_tfrecords imports tensorflow and crc32c without declaring them.
PEERS: dict[str, dict[str, Any]] = {
    "tfx_beam": {"packages": ["tfx==1.16.0", "dill"], "script": "tfx_beam.py",
                 "what": "TFX LocalDagRunner on Beam's DirectRunner (multi_processing): "
                         "CsvExampleGen -> StatisticsGen (TFDV) -> SchemaGen -> ExampleValidator"},
    "ray_data": {"packages": ["ray[data]==2.60.0", "tensorflow==2.21.0", "crc32c"],
                 "script": "ray_data.py",
                 "what": "Ray Data on a local Ray: read_csv -> write_tfrecords"},
}
INSTALL_TIMEOUT_S = 1800


def _uv() -> str:
    local = Path(sys.executable).parent / "uv"
    return str(local) if local.exists() else (shutil.which("uv") or "uv")


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_env(name: str) -> dict[str, Any]:
    """Create or reuse the peer's environment; ``{"ok": True}`` or the installer's error."""
    packages = PEERS[name]["packages"]
    env = ENVS / name
    stamp = env / f".installed-{hashlib.sha256(json.dumps(packages).encode()).hexdigest()[:12]}"
    python = env / "bin" / "python"
    if stamp.exists() and python.exists():
        return {"ok": True, "python": str(python), "packages": packages, "reused": True}
    t0 = time.perf_counter()
    steps = [[_uv(), "venv", "-q", "--allow-existing", "--python", sys.executable, str(env)],
             [_uv(), "pip", "install", "-q", "--python", str(python), *packages]]
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "packages": packages, "command": " ".join(cmd),
                    "error": f"{type(exc).__name__}: {exc}"}
        if proc.returncode != 0:
            return {"ok": False, "packages": packages, "command": " ".join(cmd),
                    "error": _tail(proc.stderr or proc.stdout)}
    for old in env.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return {"ok": True, "python": str(python), "packages": packages, "reused": False,
            "install_s": time.perf_counter() - t0}


def count_records(pattern: str, compression: str | None) -> int:
    """Records in the TFRecord files matching ``pattern`` (TensorFlow's reader, fast)."""
    import tensorflow as tf

    files = sorted(glob(pattern))
    if not files:
        return 0
    ds = tf.data.TFRecordDataset(files, compression_type=compression or "")
    return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1).numpy())


def _command(name: str, python: str, raw_dir: Path, files: list[str], out: Path,
             workers: int, text_columns: list[str]) -> list[str]:
    script = str(SCRIPTS / PEERS[name]["script"])
    if name == "tfx_beam":
        pattern = str(Path(files[0]).relative_to(raw_dir).parent.parent / "*" / Path(files[0]).name)
        return [python, script, str(raw_dir), pattern, str(out), str(workers)]
    listing = out.parent / f"{name}-files.json"
    listing.write_text(json.dumps(files))
    return [python, script, str(listing), str(out), str(workers), ",".join(text_columns)]


def run_peer(name: str, raw_dir: Path, files: list[str], work: Path, workers: int,
             text_columns: list[str], timeout_s: float) -> dict[str, Any]:
    """Install (or reuse) the peer, run it over ``files``, count what it wrote."""
    env = ensure_env(name)
    base = {"what": PEERS[name]["what"], "packages": PEERS[name]["packages"]}
    if not env["ok"]:
        return {**base, "absent": "install failed", "command": env["command"],
                "error": env["error"]}
    out = work / f"peer-{name}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = _command(name, env["python"], raw_dir, files, out, workers, text_columns)
    child = run_child(cmd, cwd=out, timeout_s=timeout_s)
    if child.returncode != 0:
        return {**base, "absent": f"timed out after {timeout_s:.0f} s" if child.timed_out
                else "run failed", "command": " ".join(cmd),
                "error": _tail(child.stderr or child.stdout), **child.figures()}
    done = last_json(child.stdout)
    rows = count_records(done["examples_glob"], done.get("compression"))
    return {**base, "rows": rows, "rows_per_s": rows / child.wall_s if rows else None,
            **child.figures(), "reported": done, "install": env}


def run_peers(names: list[str], raw_dir: Path, files: list[str], work: Path, workers: int,
              text_columns: list[str], timeout_s: float = 3600) -> dict[str, Any]:
    """One entry per known peer: its figures, or why it is absent."""
    out: dict[str, Any] = {}
    for name in PEERS:
        if name not in names:
            out[name] = {"what": PEERS[name]["what"], "absent": "not run (--peers)"}
            continue
        out[name] = run_peer(name, raw_dir, files, work, workers, text_columns, timeout_s)
    return out
