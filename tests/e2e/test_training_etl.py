"""Training on a version the real ETL wrote: a week of January 2013 flights.

The fixtures elsewhere mimic the ETL's output; this test holds training to the real thing
(its schema, statistics, vocabularies and shard naming), including serving-time inputs
decoded straight from the ETL's records.
"""

from __future__ import annotations

from datetime import date

import keras
import numpy as np
import pytest
import tensorflow as tf
from distributed import Client, LocalCluster

from etl import pipeline, storage, versions
from etl.kinds.landing import LandOptions
from training.config import InputConfig, TrainConfig
from training.data.tabular import local_or_remote_path, make_dataset
from training.run.train import train

START, END = date(2013, 1, 1), date(2013, 1, 8)


@pytest.fixture(scope="module")
def etl_version(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("root").as_uri()
    pipeline.land(root, "flights", LandOptions(start=START, end=END))
    # in-process workers: spawning worker processes costs more than this week of data
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        result = pipeline.run("flights", root, f"{END}T00:00:00Z", f"{START}T00:00:00Z",
                              run_id="training-etl-test")
    return root, result.version_uri


def _raw_test_records(uri: str, manifest: versions.Manifest) -> dict[str, tf.Tensor]:
    """The test split's feature values decoded in Python from the shards, no tf.data parse."""
    features = manifest.schema.features
    columns: dict[str, list] = {name: [] for name in features}
    for shard in manifest.splits["test"].shards:
        path = local_or_remote_path(versions.shard_uri(uri, shard))  # under its segment
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            example = tf.train.Example.FromString(record).features.feature
            for name, feat in features.items():
                kind = {"float32": "float_list", "int64": "int64_list"}.get(feat.dtype, "bytes_list")
                columns[name].append(getattr(example[name], kind).value[0])
    return {n: tf.constant(v, dtype=features[n].dtype) for n, v in columns.items()}


def test_trains_on_a_version_written_by_the_real_etl(etl_version) -> None:
    root, uri = etl_version
    manifest = versions.read_manifest(uri)
    assert manifest.schema.label.name == "late"
    config = TrainConfig(input=InputConfig(batch_size=256, seed=1), epochs=4, min_margin=0.0,
                         steps_per_execution=4)
    result = train(uri, storage.join(root, "models"), "etl-run", config)
    metrics = result.metrics.to_json()
    assert metrics["test"]["examples"] == manifest.splits["test"].num_examples
    assert metrics["test"]["auc"] > 0.6  # schedule and weather do predict delays
    assert metrics["test"]["accuracy"] >= metrics["baseline"]["accuracy"]

    served = tf.saved_model.load(local_or_remote_path(storage.join(result.model_uri, "saved_model")))
    model = keras.saving.load_model(local_or_remote_path(storage.join(result.model_uri, "model.keras")))
    via_pipeline = model.predict(make_dataset(uri, "test", manifest, InputConfig(batch_size=128)), verbose=0)
    via_raw = served.serve(_raw_test_records(uri, manifest)).numpy()
    np.testing.assert_allclose(via_raw, via_pipeline, rtol=1e-5, atol=1e-6)
