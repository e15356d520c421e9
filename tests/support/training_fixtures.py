"""Small flights-like dataset versions for the training tests, written per docs/INTERFACES.md.

The records are synthetic but shaped like the ETL's output (numeric float32/int64 features,
string and int64 categoricals, label ``late`` at ~23%) and the label depends on the features,
so a model can learn it; ``random_labels=True`` gives a version nothing can learn (quality
gate tests). Everything is seeded, so a version's bytes and checksums are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from etl.versions import Manifest

DATASET = "flights"
VERSION = "20130105T000000Z_20130101T000000Z"
CARRIERS = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E"]
DESTS = [f"D{i:02d}" for i in range(40)]  # > one-hot limit: exercises the embedding path
FEATURES = {
    "distance": {"dtype": "float32", "kind": "numeric"},
    "sched_dep_hour": {"dtype": "float32", "kind": "numeric"},
    "temp": {"dtype": "float32", "kind": "numeric"},
    "plane_seats": {"dtype": "int64", "kind": "numeric"},
    "carrier": {"dtype": "string", "kind": "categorical"},
    "dest": {"dtype": "string", "kind": "categorical"},
    "day_of_week": {"dtype": "int64", "kind": "categorical"},
}
SPLIT_FRACTIONS = (("train", 0.8), ("eval", 0.1), ("test", 0.1))


@dataclass(frozen=True)
class WrittenVersion:
    """A version on local disk plus the rows it holds, for checks against what was parsed."""

    root: Path
    uri: str
    path: Path
    manifest: dict[str, Any]  # manifest.json as written
    rows: dict[str, list[dict[str, Any]]]  # split -> rows in file order (shard 0 first)

    @property
    def typed(self) -> Manifest:
        """The manifest as training reads it."""
        return typed(self.manifest)


def typed(manifest: dict[str, Any]) -> Manifest:
    """A test's manifest (a JSON object) as training reads it."""
    return Manifest.from_json(manifest, "the test's manifest")


def make_rows(n: int, seed: int, random_labels: bool = False) -> list[dict[str, Any]]:
    """Flights-like rows whose label follows the departure hour, carrier, temp and route."""
    rng = np.random.default_rng(seed)
    hour = rng.integers(5, 24, n).astype(np.float32)
    carrier = rng.integers(0, len(CARRIERS), n)
    dest = rng.integers(0, len(DESTS), n)
    temp = rng.normal(55, 18, n).astype(np.float32)
    dow = rng.integers(0, 7, n)
    logit = -4.0 + 0.5 * (hour - 13) + 1.5 * (carrier % 3 == 0) + 0.06 * (temp - 55)
    logit = logit + 0.8 * (dest % 5 == 0) + 0.5 * (dow == 4)  # best accuracy ~0.88 vs 0.76
    p = 1 / (1 + np.exp(-logit))
    late = rng.random(n) < (np.full(n, 0.23) if random_labels else p)
    return [
        {
            "distance": float(np.float32(rng.uniform(100, 2500))),
            "sched_dep_hour": float(hour[i]),
            "temp": float(temp[i]),
            "plane_seats": int(rng.integers(20, 400)),
            "carrier": CARRIERS[carrier[i]],
            "dest": DESTS[dest[i]],
            "day_of_week": int(dow[i]),
            "late": int(late[i]),
        }
        for i in range(n)
    ]


def encode(row: dict[str, Any], features: dict[str, dict[str, str]] | None = None) -> bytes:
    """One ``tf.train.Example`` holding every feature (``features``; None = ``FEATURES``) and
    the label."""
    import tensorflow as tf

    features = FEATURES if features is None else features
    feats = {}
    for name, value in row.items():
        dtype = features.get(name, {"dtype": "int64"})["dtype"]
        if dtype == "float32":
            feats[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        elif dtype == "int64":
            feats[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        else:
            feats[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def write_version(
    root: Path,
    n: int = 4000,
    seed: int = 0,
    random_labels: bool = False,
    shards: dict[str, int] | None = None,
    version: str = VERSION,
    dataset: str = DATASET,
    compression: str | None = None,
    names: Sequence[str] = (),
    categorical: Sequence[str] | None = None,
) -> WrittenVersion:
    """Write shards, then manifest.json last, then LATEST, exactly as a publish would.
    ``names``: the features' names instead of ``FEATURES``', ``categorical`` those of them
    that are categorical (``named_features``)."""
    import tensorflow as tf

    shards = shards or {"train": 3, "eval": 1, "test": 1}
    copies = named_features(names, categorical) if names else {name: name for name in FEATURES}
    features = {name: FEATURES[source] for name, source in copies.items()}
    rows = make_rows(n, seed, random_labels)
    if names:
        rows = [{**{name: row[source] for name, source in copies.items()}, "late": row["late"]}
                for row in rows]
    path = Path(root) / "datasets" / dataset / version
    path.mkdir(parents=True, exist_ok=True)
    by_split, start = {}, 0
    for split, frac in SPLIT_FRACTIONS:
        stop = n if split == "test" else start + round(n * frac)
        by_split[split], start = rows[start:stop], stop
    splits_meta, ordered = {}, {}
    for split, split_rows in by_split.items():
        k = shards[split]
        chunks = [split_rows[i::k] for i in range(k)]
        entries = []
        for i, chunk in enumerate(chunks):
            name = f"{dataset}-{split}.tfrecord-{i:05d}-of-{k:05d}" + (".gz" if compression else "")
            options = tf.io.TFRecordOptions(compression_type="GZIP" if compression else None)
            with tf.io.TFRecordWriter(str(path / name), options) as w:
                for row in chunk:
                    w.write(encode(row, features))
            data = (path / name).read_bytes()
            entries.append({"file": name, "records": len(chunk), "bytes": len(data),
                            "sha256": hashlib.sha256(data).hexdigest()})
        ordered[split] = [r for c in chunks for r in c]
        splits_meta[split] = {"num_examples": len(split_rows),
                              "num_bytes": sum(e["bytes"] for e in entries), "shards": entries}
    manifest = build_manifest(dataset, version, splits_meta, by_split["train"], features)
    manifest["compression"] = compression
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    (Path(root) / "datasets" / dataset / "LATEST").write_text(version)
    return WrittenVersion(Path(root), path.as_uri(), path, manifest, ordered)


def named_features(names: Sequence[str],
                   categorical: Sequence[str] | None = None) -> dict[str, str]:
    """Each of ``names`` -> the ``FEATURES`` column it holds a copy of, in turn: with seven
    names or more every column is there, so the label can still be learned. ``categorical``:
    the names that take copies of the categorical columns in turn, the others copies of the
    numeric ones (every column is there from four numeric and three categorical names);
    None: every name the next column, whatever its kind."""
    columns = list(FEATURES)
    if categorical is None:
        return {name: columns[i % len(columns)] for i, name in enumerate(names)}
    by_kind = {kind: [c for c in columns if FEATURES[c]["kind"] == kind]
               for kind in ("numeric", "categorical")}
    taken = {kind: 0 for kind in by_kind}
    copies = {}
    for name in names:
        kind = "categorical" if name in categorical else "numeric"
        copies[name] = by_kind[kind][taken[kind] % len(by_kind[kind])]
        taken[kind] += 1
    return copies


def build_manifest(dataset: str, version: str, splits: dict, train: list[dict],
                   features: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """A manifest whose statistics are computed on ``train`` rows, as the transform does;
    ``features`` None = ``FEATURES``."""
    features = FEATURES if features is None else features
    numeric, vocab = {}, {}
    for name, feat in features.items():
        values = [r[name] for r in train]
        if feat["kind"] == "numeric":
            arr = np.asarray(values, dtype=np.float64)
            numeric[name] = {"mean": float(arr.mean()), "var": float(arr.var()),
                             "min": float(arr.min()), "max": float(arr.max())}
        else:
            counts: dict[Any, int] = {}
            for v in values:
                counts[v] = counts.get(v, 0) + 1
            vocab[name] = sorted(counts, key=lambda v: (-counts[v], v))
    positives = sum(r["late"] for r in train)
    return {
        "format_version": 1, "dataset": dataset, "version": version,
        "data_interval": {"start": "2013-01-01T00:00:00Z", "end": "2013-01-05T00:00:00Z"},
        "created_at": "2013-01-05T00:00:00Z", "run_id": "fixture", "code_version": "fixture",
        "compression": None, "splits": splits,
        "schema": {"key": ["time_hour", "carrier", "flight", "origin"],
                   "label": {"name": "late", "dtype": "int64", "classes": 2},
                   "features": features},
        "statistics": {"computed_on": "train", "numeric": numeric, "vocabularies": vocab,
                       "label_counts": {"0": len(train) - positives, "1": positives}},
        "source_fingerprint": {"sha256": "0" * 64, "files": []},
        "validation": {"success": True, "evaluated_rows": sum(s["num_examples"] for s in splits.values()),
                       "quarantined_rows": 0, "results": "validation/results.json",
                       "data_docs": "validation/index.html"},
    }


def close(a: float, b: float) -> bool:
    """float32 round-trip comparison for parsed values."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def drafted_iris(tmp_path: Path, per_class: int | None = None) -> tuple[Path, Path]:
    """scikit-learn's iris (``per_class`` rows of each species, all 150 when None) as a CSV
    with plain column names, landed under ``tmp_path/data`` and given the spec ``etl spec
    init`` drafts for a multiclass ``species`` label, no hand edit. Returns (data, spec folder);
    set ``PIPELINE_SPECS_PATH`` to the spec folder's parent to run it."""
    from sklearn.datasets import load_iris

    from etl.__main__ import main as etl_main

    iris = load_iris()
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    rows = [i for c in range(3) for i in np.flatnonzero(iris.target == c)[:per_class]]
    data, out = tmp_path / "data", tmp_path / "specs" / "iris"
    path = data / "raw" / "iris" / "iris.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(["id", *names, "species"]) + "\n" + "".join(
        f"{i},{','.join(f'{v:.1f}' for v in iris.data[i])},{iris.target_names[iris.target[i]]}\n"
        for i in rows))
    assert etl_main(["spec", "init", "--name", "iris", "--source", "raw/iris/iris.csv",
                     "--root", data.as_uri(), "--label", "species", "--task", "multiclass",
                     "--out", str(out)]) == 0
    return data, out


def parameter_names() -> list[str]:
    """Every parameter name of the Python functions a row of features passes through on its
    way to an answer: Keras' ``__call__`` and ``call``, ``predict`` and ``export``, our export,
    the ``tf.function`` and concrete function TF builds signatures with (their ``__call__`` and
    ``_get_concrete_function_garbage_collected``, which TF calls with a signature's keys as
    keyword arguments), and scoring's. A feature may carry any of them (issue 53)."""
    import inspect

    import keras
    import tensorflow as tf

    from training.models.tabular import export_serving, serving_signature
    from training.score.model import ServedModel, served_model

    function = tf.function(lambda x: x)
    concrete = function.get_concrete_function(tf.TensorSpec([None], tf.float32))
    layer = keras.Input((1,))
    functional = type(keras.Model(layer, layer))
    called = [type(function).__call__, type(function).get_concrete_function,
              type(function)._get_concrete_function_garbage_collected,
              type(concrete).__call__, keras.layers.Layer.__call__, keras.Model.call,
              functional.call, functional.__call__, keras.Model.predict, keras.Model.export,
              export_serving, serving_signature, ServedModel.outputs, served_model]
    return sorted({name for fn in called for name in inspect.signature(fn).parameters})
