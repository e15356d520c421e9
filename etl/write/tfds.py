"""TFDS metadata beside our shards, so ``tfds.builder_from_directory(<version dir>)`` loads them.

TFDS needs two files: ``features.json`` (the FeatureConnector tree, as
``FeaturesDict.to_json()`` writes it) and ``dataset_info.json`` (the DatasetInfo proto
as JSON: name, file format, and per split the shard lengths and a filename template).
We write both from the manifest with plain JSON, so the ETL does not import
TensorFlow; the JSON shapes follow tensorflow-datasets 4.9 (``DatasetInfo.as_json``,
``FeatureConnector.to_json``). TFDS reads only uncompressed TFRecords, so a GZIP
version gets no TFDS metadata.
"""

from __future__ import annotations

import logging
from typing import Any

from etl import storage
from etl.write import shards

log = logging.getLogger(__name__)

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
TFDS_VERSION = "1.0.0"  # TFDS wants semver; our version id goes into the description
FILEPATH_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_PKG = "tensorflow_datasets.core.features"


def feature_json(spec: dict[str, Any], is_label: bool = False) -> dict[str, Any]:
    """One FeatureConnector's JSON: Scalar, Text, ClassLabel or Image."""
    dtype, kind = spec.get("dtype"), spec.get("kind")
    if is_label:
        return {
            "pythonClassName": f"{_PKG}.class_label_feature.ClassLabel",
            "classLabel": {"numClasses": str(int(spec["classes"]))},
        }
    if kind == "image":
        if spec.get("encoding") not in ("png", "jpeg") or len(spec.get("shape", [])) != 3:
            raise ValueError(
                f"image feature: expected shape [h, w, c] and encoding png|jpeg, got {spec}"
            )
        dims = [str(-1 if d is None else int(d)) for d in spec["shape"]]
        return {
            "pythonClassName": f"{_PKG}.image_feature.Image",
            "image": {
                "shape": {"dimensions": dims},
                "dtype": "uint8",
                "encodingFormat": spec["encoding"],
            },
        }
    if dtype == "string":
        return {"pythonClassName": f"{_PKG}.text_feature.Text", "text": {}}
    if dtype in ("float32", "int64"):
        return {
            "pythonClassName": f"{_PKG}.scalar.Scalar",
            "tensor": {"shape": {}, "dtype": dtype, "encoding": "none"},
        }
    raise ValueError(f"feature dtype {dtype!r}: expected float32, int64 or string")


def features_json(schema: dict[str, Any]) -> dict[str, Any]:
    """``features.json`` content for every feature plus the label."""
    feats = {name: feature_json(spec) for name, spec in schema.get("features", {}).items()}
    label = schema.get("label")
    if label:
        # a float label (regression target) is a Scalar; an integer one is a ClassLabel
        if "classes" not in label and label.get("dtype") != "float32":
            raise ValueError(
                f"schema label {label.get('name')!r}: 'classes' is needed for ClassLabel"
            )
        feats[label["name"]] = feature_json(label, is_label="classes" in label)
    return {
        "type": f"{_PKG}.features_dict.FeaturesDict",
        "content": {"features": feats},
        "proto_cls": "tensorflow_datasets.FeaturesDict",
    }


def dataset_info_json(manifest: dict[str, Any]) -> dict[str, Any]:
    """``dataset_info.json`` content; checks shard names match TFDS's filename template."""
    dataset = manifest["dataset"]
    splits = []
    for split, info in manifest["splits"].items():
        files = info.get("shards", [])
        for i, shard in enumerate(files):
            expected = shards.shard_filename(dataset, split, i, len(files))
            if shard["file"] != expected:
                raise ValueError(
                    f"manifest split {split!r} shard {i}: file {shard['file']!r}, "
                    f"TFDS expects {expected!r}"
                )
        if files:
            splits.append(
                {
                    "name": split,
                    "filepathTemplate": FILEPATH_TEMPLATE,
                    "numBytes": str(sum(s["bytes"] for s in files)),
                    "shardLengths": [str(s["records"]) for s in files],
                }
            )
    return {
        "name": dataset,
        "version": TFDS_VERSION,
        "fileFormat": "tfrecord",
        "description": f"{dataset} version {manifest.get('version')} "
        f"(data interval {manifest.get('data_interval')}); see manifest.json",
        "splits": splits,
    }


def write_tfds_metadata(version_uri: str, manifest: dict[str, Any]) -> list[str]:
    """Write features.json and dataset_info.json into the version dir; returns their URIs.

    Returns [] (and logs why) for GZIP versions, which TFDS cannot read.
    """
    if any(s.get("segment") for info in manifest["splits"].values() for s in info["shards"]):
        log.debug("%s: composed of segments; each segment folder holds its TFDS metadata "
                  "(tfds.builder_from_directories)", version_uri)
        return []
    if shards.normalize_compression(manifest.get("compression")):
        log.warning(
            "%s: GZIP shards; TFDS reads only plain TFRecords, no TFDS metadata", version_uri
        )
        return []
    written = []
    for name, content in (
        (FEATURES, features_json(manifest["schema"])),
        (DATASET_INFO, dataset_info_json(manifest)),
    ):
        uri = storage.join(version_uri, name)
        storage.write_bytes_atomic(uri, storage.json_bytes(content))
        written.append(uri)
    return written
