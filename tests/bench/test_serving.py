"""The serving part's timing and equality checks (its real run fits flights: minutes)."""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from bench import serving


def test_rate_counts_the_rows_of_every_call() -> None:
    calls = []

    def call(batch: int) -> None:
        calls.append(batch)
        time.sleep(0.01)

    rate = serving._rate(call, [1, 2], 100, 0.1)
    assert len(calls) >= 11 and calls[0] == 1  # a warm-up, then whole cycles
    assert 100 / 0.03 < rate < 100 / 0.01


def test_latency_percentiles_come_from_each_call() -> None:
    waits = [0.001] * 99 + [0.05]
    figures = serving._latency(time.sleep, [0.0, *waits])
    assert 0.9 < figures["p50_ms"] < 5 and figures["p99_ms"] > figures["p50_ms"]


def test_gap_reads_the_probability_column_whatever_the_head_serves() -> None:
    want = np.asarray([0.1, 0.7, 0.4])
    outputs = {"class": tf.constant(["a", "b", "a"]),
               "probabilities": tf.constant(np.c_[1 - want, want + 1e-7], tf.float32)}
    assert serving.gap(outputs, want) < 1e-6
    outputs["probabilities"] = tf.constant(np.c_[1 - want, want[::-1]], tf.float32)
    assert serving.gap(outputs, want) > 0.2
