"""Input-pipeline throughput next to its ceiling and a naive baseline, and the stall ratio.

Every pipeline reads the same shards with the same batch size, gets the same warm-up,
then is timed over a fixed number of batches, in one process, side by side, ``repeats``
times round-robin (the best rate of each is reported: on a shared machine, the slower
samples measure the neighbours). Absolute figures move with the machine; the ratios are
what we hold ourselves to.

- ceiling: interleaved ``TFRecordDataset`` reads cut into batches, no parsing (what storage
  gives);
- parse ceiling: the same reads -> batches -> ``parse_example`` -> prefetch and nothing else (no
  shuffle, no feature map): the fastest any parsing pipeline over these shards and cores runs,
  the figure ours is held to (issue 15). Both ceilings cut the readers' chunks into batches
  with ``rebatch``, as ours does: ``unbatch`` then ``batch`` would handle every record
  (measured ~10% slower), and the ceiling should be the fastest bare form;
- ours: ``training.data.tabular.make_dataset`` in training mode, raw features out; and the
  same with the model's preprocessing in the feature map, as training runs it;
- naive: one file after another, ``parse_single_example`` per record, then batch, no
  prefetch and no tf.data rewrites that would parallelize it behind our back;
- stall ratio: the demo model's train-step time fed by our pipeline (with preprocessing,
  as in training) divided by its time fed by the same batches cached in memory (1.0 = the
  model never waits for input).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import keras
import tensorflow as tf

from etl.versions import Manifest
from training.config import BenchConfig, InputConfig, ModelConfig, TrainConfig
from training.data.tabular import (
    compression_type,
    feature_map,
    feature_specs,
    make_dataset,
    parse_batch,
    read_chunks,
    shard_files,
)
from training.models.mlp import build_models, compile_model

log = logging.getLogger(__name__)


def throughput(ds: tf.data.Dataset, batch_size: int, warmup: int, batches: int) -> tuple[float, float]:
    """(examples/s, CPU microseconds per example) over ``batches`` full batches after
    ``warmup`` untimed ones (``ds`` must repeat).

    The CPU cost (all threads of this process) is what a pipeline spends per example
    whatever the neighbours do; on a shared machine it compares pipelines more steadily
    than wall-clock rates.
    """
    it = iter(ds)
    for _ in range(warmup):
        next(it)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(it)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    examples = batches * batch_size
    return examples / wall, 1e6 * cpu / examples


def ceiling_dataset(files: list[str], compression: str | None, config: InputConfig) -> tf.data.Dataset:
    """Raw records only: the fastest any parsing pipeline over these shards could go."""
    ds = read_chunks(files, compression, config, training=False, deterministic=False)
    return ds.repeat().rebatch(config.batch_size).prefetch(tf.data.AUTOTUNE)


def parse_ceiling_dataset(files: list[str], manifest: Manifest,
                          config: InputConfig) -> tf.data.Dataset:
    """Bare interleave -> batch -> ``parse_example``: parsing's ceiling over these shards."""
    ds = read_chunks(files, compression_type(manifest), config, training=False,
                     deterministic=False)
    ds = ds.repeat().rebatch(config.batch_size)
    return ds.map(parse_batch(manifest), num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def naive_dataset(files: list[str], manifest: Manifest, batch_size: int) -> tf.data.Dataset:
    """The textbook slow path: sequential files, per-record parse, batch, nothing async."""
    specs, split_label = feature_specs(manifest), feature_map(manifest)
    compression = compression_type(manifest)
    ds = tf.data.TFRecordDataset(files, compression_type=compression).repeat()
    ds = ds.map(lambda rec: tf.io.parse_single_example(rec, specs)).batch(batch_size).map(split_label)
    opts = tf.data.Options()
    opts.autotune.enabled = False
    opts.experimental_optimization.map_parallelization = False
    opts.experimental_optimization.inject_prefetch = False
    return ds.with_options(opts)


def stall_ratio(model: keras.Model, ds: tf.data.Dataset, batches: int) -> dict[str, float]:
    """Train-step time fed by ``ds`` over that fed by the same batches from memory.

    Each side runs two epochs of ``batches`` steps in one ``fit`` and only the second is
    timed, so tracing, compilation and buffer warm-up are left out of both.
    """
    per_call = int(getattr(model, "steps_per_execution", 1) or 1)
    batches = -(-batches // per_call) * per_call  # Keras runs whole executions only
    cached = ds.take(batches).cache()
    for _ in cached:  # fill the cache before timing anything
        pass
    t_pipeline = _timed_epoch(model, ds, batches)
    t_cached = _timed_epoch(model, cached.repeat(), batches)
    return {
        "stall_ratio": t_pipeline / t_cached,
        "step_ms_pipeline": 1000 * t_pipeline / batches,
        "step_ms_cached": 1000 * t_cached / batches,
    }


def bench_input(
    version_uri: str,
    config: BenchConfig | None = None,
    input_config: InputConfig | None = None,
    manifest: Manifest | None = None,
) -> dict[str, Any]:
    """Measure ceiling, ours, naive and the stall ratio on one version; returns the figures."""
    config = config or BenchConfig()
    if manifest is None:
        from etl.versions import read_manifest

        manifest = read_manifest(version_uri)
    icfg = input_config or InputConfig(batch_size=config.batch_size, seed=config.seed)
    files = shard_files(version_uri, config.split, manifest, icfg)
    bs, warm, n = icfg.batch_size, config.warmup_batches, config.batches
    parts = build_models(manifest, ModelConfig())
    fed = make_dataset(version_uri, config.split, manifest, icfg, training=True,
                       preprocess=parts.preprocess)
    pipelines = {
        "ceiling": (ceiling_dataset(files, compression_type(manifest), icfg), n),
        "parse_ceiling": (parse_ceiling_dataset(files, manifest, icfg), n),
        "ours": (make_dataset(version_uri, config.split, manifest, icfg, training=True), n),
        "preprocessed": (fed, n),
        "naive": (naive_dataset(files, manifest, bs), config.naive_batches),
    }
    samples: dict[str, list[float]] = {name: [] for name in pipelines}
    cpu: dict[str, list[float]] = {name: [] for name in pipelines}
    for _ in range(config.repeats):  # round-robin, so a busy moment hits every pipeline alike
        for name, (ds, batches) in pipelines.items():
            rate, cost = throughput(ds, bs, warm, batches)
            samples[name].append(rate)
            cpu[name].append(cost)
    best = {name: max(rates) for name, rates in samples.items()}
    model = compile_model(parts.core, ModelConfig(), TrainConfig().steps_per_execution)
    stall = stall_ratio(model, fed, config.stall_batches)
    ceiling, ours, naive = best["ceiling"], best["ours"], best["naive"]
    result = {
        "input_ceiling_examples_per_s": ceiling,
        "input_examples_per_s": ours,
        "input_parse_ceiling_examples_per_s": best["parse_ceiling"],
        "ratio_to_parse_ceiling": ours / best["parse_ceiling"],
        "input_preprocessed_examples_per_s": best["preprocessed"],
        "input_naive_examples_per_s": naive,
        "samples_examples_per_s": samples,
        "cpu_us_per_example": {name: min(costs) for name, costs in cpu.items()},
        "ratio_to_ceiling": ours / ceiling,
        "speedup_over_naive": ours / naive,
        **stall,
        "batch_size": bs, "batches": n, "warmup_batches": warm, "naive_batches": config.naive_batches,
        "repeats": config.repeats,
        "stall_batches": config.stall_batches, "split": config.split, "shards": len(files),
        "examples_in_split": manifest.splits[config.split].num_examples,
        "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU",
        "cores": len(os.sched_getaffinity(0)),
        "version_uri": version_uri,
    }
    log.info("bench-input: %s", result)
    return result


def format_table(result: dict[str, Any]) -> str:
    """The figures as a small aligned table, targets beside the ratios."""
    rows = [
        ("raw read (ceiling)", f"{result['input_ceiling_examples_per_s']:>12,.0f} ex/s",
         "records read and batched, not parsed (information)"),
        ("parse ceiling", f"{result['input_parse_ceiling_examples_per_s']:>12,.0f} ex/s",
         "interleave -> batch -> parse_example, nothing else"),
        ("our pipeline", f"{result['input_examples_per_s']:>12,.0f} ex/s",
         (f"{result['ratio_to_parse_ceiling']:.2f}x parse ceiling (target >= 0.80), "
         f"{result['ratio_to_ceiling']:.2f}x raw read")),
        ("+ preprocessing", f"{result['input_preprocessed_examples_per_s']:>12,.0f} ex/s",
         "lookups + normalization in the feature map, as training runs"),
        ("naive pipeline", f"{result['input_naive_examples_per_s']:>12,.0f} ex/s",
         f"ours is {result['speedup_over_naive']:.1f}x (target >= 10)"),
        ("stall ratio", f"{result['stall_ratio']:>12.3f}",
         (f"step {result['step_ms_pipeline']:.2f} ms fed / {result['step_ms_cached']:.2f} ms "
          "cached (target <= 1.10)")),
    ]
    head = (f"bench-input on {result['version_uri']} [{result['split']}, {result['shards']} shards, "
            f"batch {result['batch_size']}, {result['batches']} timed batches, {result['device']}, "
            f"{result['cores']} cores]")
    cost = result["cpu_us_per_example"]
    cpu_line = ("CPU per example (us): " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items())
                + f"; naive/ours {cost['naive'] / cost['ours']:.1f}x")
    return "\n".join([head] + [f"  {a:<20} {b:<22} {c}" for a, b, c in rows] + [f"  {cpu_line}"])


def _timed_epoch(model: keras.Model, ds: tf.data.Dataset, steps: int) -> float:
    timer = _SecondEpochTimer()
    model.fit(ds, epochs=2, steps_per_epoch=steps, callbacks=[timer], verbose=0, shuffle=False)
    return timer.seconds


class _SecondEpochTimer(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.seconds, self._start = float("nan"), 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch == 1:
            self.seconds = time.perf_counter() - self._start
