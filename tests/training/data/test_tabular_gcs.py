"""Training from a gs:// root (the GCS emulator) through the verified staging path.

TensorFlow's own GCS client has no endpoint override, so it cannot reach the emulator:
against it, shards are staged with gcsfs and read locally, exactly the GPU-node path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from etl import storage
from tests.support import training_fixtures as fx
from training.config import InputConfig, TrainConfig
from training.data.tabular import make_dataset, shard_files
from training.run.train import train

pytestmark = pytest.mark.integration


def _upload(local: fx.WrittenVersion, root: str) -> str:
    """Copy the version to ``root`` shards first, manifest last (as a publish would)."""
    uri = storage.join(root, "datasets", fx.DATASET, fx.VERSION)
    fs, path = storage.get_fs(uri)
    names = sorted(p.name for p in local.path.iterdir() if p.name != "manifest.json")
    fs.put([str(local.path / n) for n in names], [f"{path}/{n}" for n in names])
    fs.put(str(local.path / "manifest.json"), f"{path}/manifest.json")
    return uri


def test_train_on_gs_version_via_staging(gcs_root: str, tmp_path: Path, monkeypatch) -> None:
    local = fx.write_version(tmp_path / "local", n=2000, seed=8)
    uri = _upload(local, gcs_root)
    manifest = local.typed
    # TF's own GCS client cannot reach an emulator: without a staging_dir, shards are staged anyway.
    assert not any(f.startswith("gs://") for f in shard_files(uri, "train", manifest))
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    assert all(f.startswith("gs://") for f in shard_files(uri, "train", manifest))  # real GCS: direct
    monkeypatch.undo()

    staged = InputConfig(batch_size=128, seed=2, staging_dir=str(tmp_path / "ssd"))
    rows = [int(y) for _, ys in make_dataset(uri, "test", manifest, staged) for y in ys.numpy()[:, 0]]
    assert rows == [r["late"] for r in local.rows["test"]]
    ssd = tmp_path / "ssd" / fx.DATASET / fx.VERSION
    assert sorted(p.name for p in ssd.iterdir()) == [
        e.file for e in manifest.splits["test"].shards]

    config = TrainConfig(input=staged, epochs=2, steps_per_execution=4, min_margin=0.02)
    result = train(uri, storage.join(gcs_root, "models"), "gcs-run", config)
    run = result.model_uri
    assert run == storage.join(gcs_root, "models", fx.DATASET, fx.VERSION, "gcs-run")
    assert storage.read_json(storage.join(run, "metrics.json"))["test"]["auc"] > 0.52
    for name in ("model.keras", "saved_model/saved_model.pb", "model_card.md", "plots/loss.png"):
        assert storage.exists(storage.join(run, name)), name
    assert not storage.exists(storage.join(run, "_backup", "training_metadata.json"))
