"""A published version as a TensorFlow Datasets builder, for users who read data with TFDS.

TFDS reads a folder through its ``DatasetInfo`` (name, features, per split the shard lengths).
We do not store that beside every segment: it follows from what a segment's ``segment.json``
and the version's manifest already say, so it is made here, in memory, from them. A version
composed of segments is the union of its segments' folders (what TFDS's
``builder_from_directories`` does for "each day a new dataset is produced"), restricted to
the segments its manifest lists, so split sizes are the version's. A version written before
segments existed has its own ``dataset_info.json`` and is opened with
``builder_from_directory``. GZIP shards cannot be read by TFDS.
"""

from __future__ import annotations

from typing import Any

from etl import storage, versions
from etl.versions import segments

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
    """The ``features`` field of a DatasetInfo proto (JSON form): every feature, the label."""
    feats = {name: feature_json(spec) for name, spec in schema.get("features", {}).items()}
    label = schema.get("label")
    if label:
        # a float label (regression target) is a Scalar; an integer one is a ClassLabel
        if "classes" not in label and label.get("dtype") != "float32":
            raise ValueError(
                f"schema label {label.get('name')!r}: 'classes' is needed for ClassLabel"
            )
        feats[label["name"]] = feature_json(label, is_label="classes" in label)
    return {"pythonClassName": f"{_PKG}.features_dict.FeaturesDict",
            "featuresDict": {"features": feats}}


def dataset_info_json(manifest: dict[str, Any]) -> dict[str, Any]:
    """A segment's (or version's) DatasetInfo proto as JSON, from its ``segment.json`` (or
    manifest); checks that shard names match TFDS's filename template."""
    from tensorflow_datasets.core import naming

    dataset = manifest["dataset"]
    splits = []
    for split, info in manifest["splits"].items():
        files = info.get("shards", [])
        for i, shard in enumerate(files):
            expected = naming.ShardedFileTemplate(
                data_dir=".", template=FILEPATH_TEMPLATE, dataset_name=dataset, split=split,
                filetype_suffix="tfrecord").sharded_filepath(shard_index=i, num_shards=len(files)).name
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


def _path(uri: str) -> str:
    """What TFDS's epath opens: a local path for ``file://``, the URI itself for ``gs://``."""
    return uri if storage.is_gcs(uri) else storage.get_fs(uri)[1]


def builder(version_uri: str) -> Any:
    """The read-only TFDS builder of a published version.

    >>> b = builder("file:///data/datasets/flights/20140101T000000Z_all")
    >>> ds = b.as_dataset(split="train")

    Raises:
        IncompleteVersionError: the version is not published.
        ValueError: its shards are GZIP-compressed, which TFDS cannot read.
    """
    import tensorflow_datasets as tfds

    manifest = versions.read_manifest(version_uri)
    if manifest.get("compression"):
        raise ValueError(f"{version_uri}: {manifest['compression']} shards; TFDS reads only "
                         "plain TFRecords (publish with compression none)")
    listed = sorted(segments.referenced(manifest))
    if not listed:
        return tfds.builder_from_directory(_path(version_uri))
    dataset_uri = version_uri.rstrip("/").rsplit("/", 1)[0]
    folders = {_path(storage.join(dataset_uri, versions.SEGMENTS_DIR, seg)):
               _segment_meta(dataset_uri, seg) for seg in listed}
    return _union(folders, manifest["schema"])


def _segment_meta(dataset_uri: str, seg: str) -> dict[str, Any]:
    uri = storage.join(dataset_uri, versions.SEGMENTS_DIR, seg)
    meta = segments.read_segment(uri)
    if meta is None:
        raise FileNotFoundError(f"{uri}: segment.json is missing; the version lists this "
                                "segment, so it was deleted after publishing")
    return meta


def _union(folders: dict[str, dict[str, Any]], schema: dict[str, Any]) -> Any:
    """One read-only builder over segment folders: the first folder's builder, its splits
    replaced by every folder's together (each split's files found in its own folder)."""
    from google.protobuf import json_format
    from tensorflow_datasets.core import naming, read_only_builder, splits
    from tensorflow_datasets.core.proto import dataset_info_pb2

    features = features_json(schema)
    protos = {folder: json_format.ParseDict(
        {**dataset_info_json({**meta, "version": meta["segment"]}),
         "features": features}, dataset_info_pb2.DatasetInfo())
        for folder, meta in folders.items()}
    merged = splits.SplitDict.merge_multiple([
        splits.SplitDict.from_proto(
            repeated_split_infos=proto.splits,
            filename_template=naming.ShardedFileTemplate(
                dataset_name=proto.name, data_dir=folder, filetype_suffix=proto.file_format))
        for folder, proto in protos.items()])
    first = next(iter(protos))
    out = read_only_builder.ReadOnlyBuilder(builder_dir=first, info_proto=protos[first])
    out.info.set_splits(merged)
    return out
