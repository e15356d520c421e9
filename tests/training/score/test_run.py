"""Scoring a published window: the predictions are the model's own, published manifest-last,
idempotent per window and model, and a killed run leaves nothing visible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import training_fixtures as fx
from training.score.publish import list_published, predictions_uri, read_predictions
from training.score.run import ScoreOptions, score


def _options(store: fx.WrittenVersion, **kw) -> ScoreOptions:
    return ScoreOptions(root=store.root.as_uri(), dataset=fx.DATASET, batch_size=97, **kw)


def _raw(rows: list[dict]) -> dict[str, tf.Tensor]:
    return {name: tf.constant([r[name] for r in rows], dtype=feat["dtype"])
            for name, feat in fx.FEATURES.items()}


def test_a_scored_window_holds_the_models_own_predictions(store, trained) -> None:
    done = score(_options(store, run_id="manual-1"))
    assert done.created
    model_id = f"{fx.VERSION}--run-1"
    assert done.uri == predictions_uri(store.root.as_uri(), fx.DATASET, fx.VERSION, model_id)
    frame = read_predictions(done.uri)
    total = sum(len(r) for r in store.rows.values())
    assert len(frame) == total == done.manifest["rows"] == done.manifest["scored"]
    assert set(frame["model_run"]) == {"run-1"} and set(frame["version"]) == {fx.VERSION}
    assert {"carrier", "split", "shard", "record", "late", "prediction", "probability_0",
            "probability_1"} <= set(frame.columns)
    model = keras.saving.load_model(store.root / "models" / fx.DATASET / fx.VERSION / "run-1"
                                    / "model.keras")
    for split, rows in store.rows.items():  # the fixture's rows in shard order, shard by shard
        got = frame[frame["split"] == split].sort_values(["shard", "record"], kind="stable")
        own = model(_raw(rows), training=False).numpy()[:, 0]
        np.testing.assert_allclose(got["probability_1"].to_numpy(), own, rtol=1e-5, atol=1e-6)
        assert list(got["prediction"]) == [str(int(p >= 0.5)) for p in own]
        assert list(got["late"]) == [str(r["late"]) for r in rows]
        assert list(got["carrier"]) == [r["carrier"] for r in rows]
    np.testing.assert_allclose(frame["probability_0"] + frame["probability_1"], 1.0, atol=1e-6)
    dist = done.manifest["distribution"]
    assert dist["kind"] == "class" and dist["labels"] == ["0", "1"]
    assert sum(dist["scored"]) == total and sum(dist["reference"]) == len(store.rows["test"])
    assert dist["drifted"] is False  # the same population as the test split
    assert done.manifest["model"]["run"] == "run-1" and done.manifest["run_id"] == "manual-1"
    assert (fx.VERSION, model_id) in list_published(store.root.as_uri(), fx.DATASET)


def test_scoring_again_is_idempotent(store, trained) -> None:
    first = score(_options(store))
    manifest = (store.root / "predictions" / fx.DATASET / fx.VERSION / f"{fx.VERSION}--run-1"
                / "manifest.json")
    before = manifest.read_bytes()
    again = score(_options(store, version=fx.VERSION))
    assert not again.created and again.manifest == first.manifest
    assert manifest.read_bytes() == before


KILLED = textwrap.dedent("""
    import os, signal, sys
    import training.score.publish as publish
    from training.score.run import ScoreOptions, score

    def die(*args, **kwargs):  # every part written, the manifest not yet
        os.kill(os.getpid(), signal.SIGKILL)

    publish.versions.commit_manifest = die
    score(ScoreOptions(root=sys.argv[1], dataset=sys.argv[2], batch_size=97))
""")


def test_a_killed_run_leaves_nothing_visible_and_its_rerun_publishes(
        tmp_path, store, trained) -> None:
    import shutil

    root = tmp_path / "root"  # a store of its own: the other tests' predictions stay apart
    shutil.copytree(store.root / "datasets", root / "datasets")
    shutil.copytree(store.root / "models", root / "models")
    current = json.loads((root / "models" / fx.DATASET / "current.json").read_text())
    current["model_uri"] = current["model_uri"].replace(store.root.as_uri(), root.as_uri())
    (root / "models" / fx.DATASET / "current.json").write_text(json.dumps(current))
    metrics = root / "models" / fx.DATASET / fx.VERSION / "run-1" / "metrics.json"
    m = json.loads(metrics.read_text())
    m["version_uri"] = m["version_uri"].replace(store.root.as_uri(), root.as_uri())
    metrics.write_text(json.dumps(m))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-c", KILLED, root.as_uri(), fx.DATASET], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == -9, proc.stderr[-2000:]
    folder = root / "predictions" / fx.DATASET / fx.VERSION / f"{fx.VERSION}--run-1"
    assert list(folder.glob("part-*.parquet"))  # it got as far as the parts
    assert not (folder / "manifest.json").exists()
    assert list_published(root.as_uri(), fx.DATASET) == []
    with pytest.raises(FileNotFoundError, match="nothing published"):
        read_predictions(folder.as_uri())
    done = score(ScoreOptions(root=root.as_uri(), dataset=fx.DATASET, batch_size=97))
    assert done.created and (folder / "manifest.json").exists()
    assert not (folder / "_WRITER").exists()
    assert len(read_predictions(done.uri)) == done.manifest["rows"]
    assert sorted(p.name for p in folder.glob("part-*")) == [p["file"] for p in
                                                            done.manifest["parts"]]


def test_scoring_without_a_current_model_says_so(tmp_path) -> None:
    fx.write_version(tmp_path, n=200, seed=1)
    proc = subprocess.run([sys.executable, "-m", "training", "score", "--root",
                           tmp_path.as_uri(), "--dataset", fx.DATASET], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "no current model" in proc.stderr and "Traceback" not in proc.stderr
