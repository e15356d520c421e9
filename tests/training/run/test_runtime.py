"""The GPU code paths, run on the CPU: MirroredStrategy over two logical devices (the path
taken with more than one GPU) and forced mixed_float16 (loss scaling, float32 outputs), through
a crash and a resumed run. No machine here has a GPU with TensorFlow, so without these a break
in those paths would first show on a GPU node.

Logical devices must be configured before TensorFlow initializes, so each case runs in a fresh
interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from tests.support import training_fixtures as fx
from training.config import InputConfig, ModelConfig, TrainConfig
from training.run.train import train

precision, root = sys.argv[1], sys.argv[2]
store = fx.write_version(__import__("pathlib").Path(root), n=2000, seed=5)
config = TrainConfig(input=InputConfig(batch_size=64, shuffle_buffer=512, seed=1), epochs=2,
                     patience=5, steps_per_execution=2, min_margin=0.0, precision=precision,
                     devices=("/cpu:0", "/cpu:1"), model=ModelConfig(family="mlp"))
models = store.root.as_uri() + "/models"
seen = {}

class Crash(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        seen["replicas"] = self.model.distribute_strategy.num_replicas_in_sync
        seen["optimizer"] = type(self.model.optimizer).__name__
        seen["variable_dtype"] = self.model.trainable_variables[0].dtype
        seen["loss"] = float(logs["loss"])
        raise RuntimeError("worker lost after epoch 1")

try:
    train(store.uri, models, "run", config, callbacks=[Crash()])
except RuntimeError as exc:
    seen["crashed"] = str(exc)
result = train(store.uri, models, "run", config)
model = keras.models.load_model(store.root / "models" / fx.DATASET / fx.VERSION / "run" / "model.keras")
out = model({n: tf.constant([r[n] for r in fx.make_rows(4, seed=9)], dtype=f["dtype"])
             for n, f in fx.FEATURES.items()})
m = result.metrics.to_json()
print("RESULT=" + json.dumps({**seen, "metrics_replicas": m["replicas"], "precision": m["precision"],
      "resumed_from_epoch": m["resumed_from_epoch"], "epochs_run": m["epochs_run"],
      "test_loss": m["test"]["loss"], "output_dtype": out.dtype.name,
      "finite": bool(tf.reduce_all(tf.math.is_finite(out)))}))
"""


def _run(precision: str, root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, precision, str(root)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT=")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("RESULT="))


@pytest.mark.parametrize("precision", ["mixed_float16", "float32"])
def test_mirrored_training_on_two_devices_survives_a_crash_and_resumes(precision, tmp_path):
    got = _run(precision, tmp_path)
    assert got["crashed"] == "worker lost after epoch 1"
    assert got["replicas"] == got["metrics_replicas"] == 2
    assert got["precision"] == precision
    assert got["resumed_from_epoch"] == 1 and got["epochs_run"] == 1
    assert got["output_dtype"] == "float32" and got["finite"]
    assert got["variable_dtype"] == "float32"  # mixed precision keeps float32 master weights
    if precision == "mixed_float16":
        assert got["optimizer"] == "LossScaleOptimizer"
    else:
        assert got["optimizer"] != "LossScaleOptimizer"
    assert 0 < got["test_loss"] < 10


def test_the_phases_line_says_what_the_fit_phase_holds() -> None:
    from training.run.runtime import Phases

    phases = Phases()
    with phases.phase("fit", "each family tried, the choice"):
        pass
    with phases.phase("export"):
        pass
    line = phases.line()
    assert line.startswith("phases: fit (each family tried, the choice) 0.0 s (CPU ")
    assert ", export 0.0 s (CPU " in line and set(phases.figures) == {"fit", "export"}
