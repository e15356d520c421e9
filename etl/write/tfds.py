"""``dataset_info.json`` beside a segment's shards, so stock TFDS loads a version.

A version composed of segments is, to TFDS, a dataset spread over folders:
``tfds.builder_from_directories([<dataset>/segments/<id> for each segment the manifest lists])``
reads every folder's ``dataset_info.json`` and adds up their splits, which gives the version's
split sizes exactly. One object per segment, written before ``segment.json`` (a nightly run
builds one segment, so one object more); the features go into the proto's own ``features``
field, so no ``features.json`` is needed.

A single ``dataset_info.json`` per version cannot do this: TFDS's ``SplitInfo`` finds all of
a split's shards in one folder under one file template, and a version's split spans many
segment folders (``SplitDict`` keeps one entry per split name). The JSON shapes follow
tensorflow-datasets 4.9 (``DatasetInfo`` proto as JSON, ``FeatureConnector.to_json``),
written as plain JSON so the ETL needs no TFDS import. TFDS reads only plain TFRecords: a
GZIP segment gets no TFDS file.
"""

from __future__ import annotations

from typing import Any

from etl import storage
from etl.versions.segment import DATASET_INFO, SegmentMeta
from etl.write.shards import normalize_compression, shard_filename

__all__ = ["DATASET_INFO", "dataset_info_json", "features_json", "write_dataset_info"]
TFDS_VERSION = "1.0.0"  # TFDS wants semver, the same in every folder; our ids go in the text
FILEPATH_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_PKG = "tensorflow_datasets.core.features"


def feature_json(spec: dict[str, Any], is_label: bool = False) -> dict[str, Any]:
    """One FeatureConnector's JSON: Scalar, Text, ClassLabel or Image."""
    dtype, kind = spec.get("dtype"), spec.get("kind")
    if is_label:
        return {"pythonClassName": f"{_PKG}.class_label_feature.ClassLabel",
                "classLabel": {"numClasses": str(int(spec["classes"]))}}
    if kind == "image":
        if spec.get("encoding") not in ("png", "jpeg") or len(spec.get("shape", [])) != 3:
            raise ValueError(
                f"image feature: expected shape [h, w, c] and encoding png|jpeg, got {spec}")
        dims = [str(-1 if d is None else int(d)) for d in spec["shape"]]
        return {"pythonClassName": f"{_PKG}.image_feature.Image",
                "image": {"shape": {"dimensions": dims}, "dtype": "uint8",
                          "encodingFormat": spec["encoding"]}}
    if dtype == "string":
        return {"pythonClassName": f"{_PKG}.text_feature.Text", "text": {}}
    if dtype in ("float32", "int64"):
        return {"pythonClassName": f"{_PKG}.scalar.Scalar",
                "tensor": {"shape": {}, "dtype": dtype, "encoding": "none"}}
    raise ValueError(f"feature dtype {dtype!r}: expected float32, int64 or string")


def features_json(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``features`` field of a DatasetInfo proto (JSON form): every feature, the label."""
    feats = {name: feature_json(spec) for name, spec in schema.get("features", {}).items()}
    label = schema.get("label")
    if label:
        # a float label (regression target) is a Scalar; an integer one is a ClassLabel
        if "classes" not in label and label.get("dtype") != "float32":
            raise ValueError(
                f"schema label {label.get('name')!r}: 'classes' is needed for ClassLabel")
        feats[label["name"]] = feature_json(label, is_label="classes" in label)
    return {"pythonClassName": f"{_PKG}.features_dict.FeaturesDict",
            "featuresDict": {"features": feats}}


def dataset_info_json(meta: SegmentMeta) -> dict[str, Any]:
    """A segment's DatasetInfo proto as JSON, from its ``segment.json`` body; checks that
    shard names follow TFDS's file template (TFDS finds shards by name, not by a list)."""
    dataset, splits = str(meta.dataset), []
    for split, info in meta.splits.items():
        files = info.shards
        for i, shard in enumerate(files):
            expected = shard_filename(dataset, split, i, len(files))
            if shard.file != expected:
                raise ValueError(f"{meta.segment}: split {split!r} shard {i}: file "
                                 f"{shard.file!r}, TFDS expects {expected!r}")
        if files:
            splits.append({"name": split, "filepathTemplate": FILEPATH_TEMPLATE,
                           "numBytes": str(sum(s.bytes for s in files)),
                           "shardLengths": [str(s.records) for s in files]})
    if meta.schema is None:
        raise ValueError(f"{meta.segment}: segment.json has no 'schema', which TFDS needs")
    return {
        "name": dataset, "version": TFDS_VERSION, "fileFormat": "tfrecord",
        "description": f"{dataset} segment {meta.segment} (partition "
                       f"{meta.partition}); load a version with "
                       "tfds.builder_from_directories over the segments its manifest lists",
        "features": features_json(meta.schema),
        "splits": splits,
    }


def write_dataset_info(segment_uri: str, meta: SegmentMeta) -> bool:
    """Write the segment's ``dataset_info.json`` (before its ``segment.json``); False, and
    nothing written, for GZIP shards, which TFDS cannot read."""
    if normalize_compression(meta.compression):
        return False
    storage.write_bytes_atomic(storage.join(segment_uri, DATASET_INFO),
                               storage.json_bytes(dataset_info_json(meta)))
    return True
