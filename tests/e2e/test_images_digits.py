"""The real scikit-learn digits end to end: land -> ETL -> TFDS reads it -> CNN beats chance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from distributed import Client, LocalCluster

from etl import pipeline, versions
from etl.kinds import land
from etl.versions import Manifest
from training.kinds.images.config import ImageTrainConfig
from training.kinds.images.data import make_image_dataset
from training.run.train import train

END = "2024-01-01T00:00:00Z"
DIGITS = 1797


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Manifest]:
    root = tmp_path_factory.mktemp("digits").as_uri()
    report = land(root, "digits")
    assert len(report.written) == DIGITS and report.unit == "images"
    assert len(land(root, "digits").unchanged) == DIGITS  # idempotent
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        res = pipeline.run("digits", root, END, run_id="digits")
    return root, versions.read_manifest(res.version_uri)


def test_digits_version_counts_schema_and_shards(published) -> None:
    _, manifest = published
    assert sum(s.num_examples for s in manifest.splits.values()) == DIGITS
    assert manifest.validation.quarantined_rows == 0
    assert manifest.schema.features["image"].to_json() | {"augment": None} == {
        "dtype": "string", "kind": "image", "shape": [8, 8, 1], "encoding": "png",
        "augment": None}
    assert manifest.schema.label.classes == 10
    assert sum(manifest.statistics.label_counts.values()) == \
        manifest.splits["train"].num_examples
    assert len(manifest.splits["train"].shards) >= 1


def test_the_tfds_builder_decodes_the_images(published) -> None:
    """A version is its segments' TFDS folders (``builder_from_directories``)."""
    from training.data.tfds import builder as tfds_builder

    root, manifest = published
    builder = tfds_builder(f"{root}/datasets/digits/{manifest.version}")
    ds = builder.as_dataset(split="test")
    example = next(iter(ds))
    assert example["image"].shape == (8, 8, 1) and example["image"].dtype == tf.uint8
    assert 0 <= int(example["label"]) < 10
    assert int(tf.reduce_max(example["image"])) > 0
    assert builder.info.splits["test"].num_examples == manifest.splits["test"].num_examples


def test_input_pipeline_augments_after_cache_and_is_seeded(published) -> None:
    root, manifest = published
    vuri = f"{root}/datasets/digits/{manifest.version}"
    cfg = ImageTrainConfig(batch_size=32, seed=7)
    x, y = next(iter(make_image_dataset(vuri, "train", manifest, cfg)))
    assert x.shape == (32, 8, 8, 1) and x.dtype == tf.float32 and y.dtype == tf.int64
    assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    x2, _ = next(iter(make_image_dataset(vuri, "train", manifest, cfg)))
    np.testing.assert_array_equal(x.numpy(), x2.numpy())  # a fixed seed repeats itself
    plain, _ = next(iter(make_image_dataset(vuri, "test", manifest, cfg)))
    assert plain.shape == (32, 8, 8, 1)  # eval/test: decoded, scaled, never augmented
    levels = np.unique(np.rint(plain.numpy() * 255))
    assert set(levels) <= set(np.rint(np.arange(17) * 255 / 16))  # the 17 landed grey levels
    chain = _stages(make_image_dataset(vuri, "train", manifest, cfg))  # output -> source
    first = {k: next(i for i, n in enumerate(chain) if k in n) for k in ("Cache", "Shuffle")}
    assert first["Shuffle"] < first["Cache"], chain  # cache sits before shuffle + augmentation
    assert any("ParallelMap" in n for n in chain[: first["Shuffle"]]), chain  # augment map


def _stages(ds: tf.data.Dataset) -> list[str]:
    names = []
    while ds is not None:
        names.append(type(ds).__name__)
        inputs = ds._inputs()
        ds = inputs[0] if inputs else None
    return names


def test_cnn_trains_on_digits_and_passes_the_gate(published) -> None:
    root, manifest = published
    vuri = f"{root}/datasets/digits/{manifest.version}"
    result = train(vuri, f"{root}/models", "test-run")
    m = result.metrics.to_json()
    assert m["blessing"]["blessed"] and m["test"]["accuracy"] > 0.9, m["blessing"]
    assert m["baseline"]["accuracy"] < 0.2 and m["test"]["auc"] > 0.95
    run = Path(result.model_uri[7:])
    assert (run / "metrics.json").is_file() and (run / "model.keras").is_file()
    # an image label is multi-class: the same task object as wine's decides report, gate, outputs
    names = [str(d) for d in range(10)]
    assert m["task"] == "multiclass" and m["classes"] == names and set(m["test"]["per_class"]) \
        == set(names)
    assert m["test"]["macro_f1"] > 0.9 and m["baseline"]["macro_f1"] < 0.05
    assert np.asarray(m["test"]["confusion_matrix"]).sum() == m["test"]["examples"]
    assert (run / "plots" / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run / "label.json").read_text())["names"] == names
    card = (run / "model_card.md").read_text()
    assert "| macro_f1 |" in card and "float32 images in [0, 1]" in card

