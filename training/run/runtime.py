"""Where and in what precision training runs: all visible GPUs, else the CPU, said plainly.

Mixed precision only pays on GPUs with tensor cores (compute capability >= 7.0); on CPUs
and older GPUs float16 is slower or unsupported, so "auto" keeps float32 there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import keras
import tensorflow as tf

log = logging.getLogger(__name__)

MIXED = "mixed_float16"
FLOAT32 = "float32"
MIN_MIXED_CAPABILITY = (7, 0)


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
