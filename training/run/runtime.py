"""What a fit runs on and with: the device and precision, and the Keras callbacks that make a
run survive retries and report its own speed.

Training uses all visible GPUs, else the CPU, said plainly. Mixed precision only pays on GPUs
with tensor cores (compute capability >= 7.0); on CPUs and older GPUs float16 is slower or
unsupported, so "auto" keeps float32 there.

``StorageBackupAndRestore`` keeps Keras' BackupAndRestore semantics (weights + epoch saved
at every epoch end, restored at the next ``fit``) but mirrors the backup to the storage
root through ``etl.storage``, so a task retried on another worker, or a gs:// root that
TensorFlow's own filesystem cannot reach, still resumes instead of starting over.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from etl import storage

log = logging.getLogger(__name__)

MIXED = "mixed_float16"
FLOAT32 = "float32"
MIN_MIXED_CAPABILITY = (7, 0)
WEIGHTS_FILE = "latest.weights.h5"
METADATA_FILE = "training_metadata.json"  # written last: it says which epoch the weights are


class Phases:
    """Wall and CPU seconds of each phase of a run (fit, evaluate, export), and the process's
    peak RSS so far at its end, for metrics.json's ``phases`` and the bench (issue 42: at
    scale, judging a model must stay a small part of fitting it)."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, float]] = {}
        self.about: dict[str, str] = {}  # what a phase holds, where its name does not say

    @contextlib.contextmanager
    def phase(self, name: str, about: str = "") -> Iterator[None]:
        if about:
            self.about[name] = about
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        self.figures[name] = {"seconds": round(time.perf_counter() - wall, 3),
                              "cpu_s": round(time.process_time() - cpu, 3),
                              "peak_rss_mb": round(peak_kb / 1024, 1)}

    def line(self) -> str:
        """One plain line: each phase's wall and CPU seconds."""
        return "phases: " + ", ".join(
            f"{name}{f' ({self.about[name]})' if name in self.about else ''} "
            f"{f['seconds']:.1f} s (CPU {f['cpu_s']:.1f} s)" for name, f in self.figures.items())


@dataclass(frozen=True)
class DeviceSetup:
    """The strategy to build the model under and what it runs on, for logs and metrics.json."""

    strategy: tf.distribute.Strategy
    device: str
    precision: str
    replicas: int


def setup_device(precision: str = "auto", devices: tuple[str, ...] = ()) -> DeviceSetup:
    """MirroredStrategy over >1 GPU, the default strategy otherwise; picks the precision.

    ``devices`` names the devices to mirror over instead (a subset of the GPUs, or logical
    CPU devices: how the tests run the multi-GPU path on a machine without GPUs).
    """
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        with contextlib.suppress(RuntimeError):  # already initialized: keep its setting
            tf.config.experimental.set_memory_growth(gpu, True)
    if devices:
        strategy = tf.distribute.MirroredStrategy(devices=list(devices))
    else:
        strategy = tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
    names, caps = _gpu_details(gpus)
    on_gpus = bool(gpus) and all("gpu" in d.lower() for d in devices)
    fast_fp16 = on_gpus and all(c is not None and c >= MIN_MIXED_CAPABILITY for c in caps)
    if precision == "auto":
        precision = MIXED if fast_fp16 else FLOAT32
    if devices:
        device = ", ".join(devices)
    else:
        device = f"GPU x{len(gpus)} ({', '.join(names)})" if gpus else "CPU"
    if not on_gpus:
        log.warning("no GPU in use: training on %s in %s", device, precision)
    if precision == MIXED and not fast_fp16:
        log.warning("mixed_float16 forced where float16 is not fast (%s)", caps or device)
    log.info(
        "training on %s, precision %s, %s with %d replica(s)",
        device, precision, type(strategy).__name__, strategy.num_replicas_in_sync,
    )
    return DeviceSetup(strategy, device, precision, strategy.num_replicas_in_sync)


@contextlib.contextmanager
def precision_policy(name: str) -> Iterator[None]:
    """Keras' global dtype policy for the block only: it is process-wide state."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _gpu_details(gpus: list) -> tuple[list[str], list[tuple[int, int] | None]]:
    names, caps = [], []
    for gpu in gpus:
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except (ValueError, RuntimeError):
            details = {}
        names.append(str(details.get("device_name", gpu.name)))
        cap = details.get("compute_capability")
        caps.append(tuple(cap) if cap else None)
    return names, caps


# --- callbacks ------------------------------------------------------------------------------------

class StorageBackupAndRestore(keras.callbacks.BackupAndRestore):
    """BackupAndRestore with a local working copy mirrored to ``remote_uri`` each epoch.

    The remote copy is left in place when training ends (``delete_backup`` removes it once
    the run is published), so a retry after a later failure still skips finished epochs.
    """

    def __init__(self, remote_uri: str, local_dir: str | Path) -> None:
        super().__init__(backup_dir=str(local_dir), save_freq="epoch", delete_checkpoint=True)
        self.remote_uri = remote_uri
        self.resumed_from_epoch = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._pull():
            log.info("resuming from the backup at %s", self.remote_uri)
        super().on_train_begin(logs)
        self.resumed_from_epoch = int(self.model._initial_epoch or 0)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        for name in (WEIGHTS_FILE, METADATA_FILE):
            data = (Path(self.backup_dir) / name).read_bytes()
            storage.write_bytes_atomic(storage.join(self.remote_uri, name), data)

    def _pull(self) -> bool:
        """Copy a complete remote backup (metadata present) into the local backup dir."""
        meta_uri = storage.join(self.remote_uri, METADATA_FILE)
        if not storage.exists(meta_uri):
            return False
        local = Path(self.backup_dir)
        local.mkdir(parents=True, exist_ok=True)
        (local / WEIGHTS_FILE).write_bytes(storage.read_bytes(storage.join(self.remote_uri, WEIGHTS_FILE)))
        (local / METADATA_FILE).write_bytes(storage.read_bytes(meta_uri))
        return True


def delete_backup(remote_uri: str) -> None:
    """Drop a run's remote backup: the run it protected is complete."""
    fs, path = storage.get_fs(remote_uri)
    for name in (METADATA_FILE, WEIGHTS_FILE):  # metadata first: never a half backup
        if fs.exists(f"{path}/{name}"):
            fs.rm(f"{path}/{name}")
    if not storage.is_gcs(remote_uri) and fs.exists(path):
        fs.rm(path, recursive=True)  # local folders outlive their files; GCS ones do not


class EpochTimer(keras.callbacks.Callback):
    """Wall time and steps of each epoch, for training throughput in examples/s."""

    def __init__(self, batch_size: int, steps_per_epoch: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.epochs: list[dict[str, Any]] = []
        self._start = 0.0
        self._train_end: float | None = None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start, self._train_end = time.perf_counter(), None

    def on_test_begin(self, logs: dict | None = None) -> None:
        if self._train_end is None:  # the epoch's validation pass starts: stop the clock
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        end = self._train_end or time.perf_counter()
        self.epochs.append({"epoch": epoch, "seconds": end - self._start})

    def examples_per_s(self) -> float | None:
        """Training-step rate without validation; the first epoch (tracing, cold caches)
        is left out when there are others."""
        timed = self.epochs[1:] or self.epochs
        seconds = sum(e["seconds"] for e in timed)
        if not timed or seconds <= 0:
            return None
        return len(timed) * self.steps_per_epoch * self.batch_size / seconds


class EpochSummaries(keras.callbacks.Callback):
    """Per-epoch scalars as TensorBoard event files, in Keras' layout (``train/``,
    ``validation/``, tags ``epoch_<metric>``).

    Written with TensorFlow's core summary ops, so logging needs no ``tensorboard``
    package on the training worker (only whoever views the logs needs it).
    """

    _SCALARS = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )

    def __init__(self, log_dir: str | Path) -> None:
        super().__init__()
        self.log_dir = Path(log_dir)
        self._writers: dict[str, Any] = {}

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        for key, value in (logs or {}).items():
            part, name = ("validation", key[4:]) if key.startswith("val_") else ("train", key)
            if part not in self._writers:
                self._writers[part] = tf.summary.create_file_writer(str(self.log_dir / part))
            with self._writers[part].as_default():
                tf.summary.write(f"epoch_{name}", tf.constant(float(value)), step=epoch,
                                 metadata=self._SCALARS)
        for writer in self._writers.values():
            writer.flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        for writer in self._writers.values():
            writer.close()
