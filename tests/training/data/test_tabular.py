"""The tf.data input pipeline: stage order, knobs, determinism and parse correctness; staging a
version's shards to local disk: verified copies, reuse, refetch, refusal (byte-level: any bytes
make a shard there)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
import tensorflow as tf

from etl.errors import ChecksumMismatchError
from etl.versions import Manifest, Shard
from tests.support import training_fixtures as fx
from training.config import InputConfig
from training.data import tabular
from training.data.tabular import feature_specs, make_dataset


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> fx.WrittenVersion:
    return fx.write_version(tmp_path_factory.mktemp("store"), n=1200, seed=3)


def _graph(ds: tf.data.Dataset):
    return tf.compat.v1.GraphDef.FromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor).numpy()
    )


def _stages(ds: tf.data.Dataset) -> list[str]:
    """The dataset ops from source to sink (the graph of this pipeline is a chain)."""
    names = {
        "TensorSliceDataset": "files", "ShuffleDatasetV3": "shuffle", "RepeatDataset": "repeat",
        "ParallelInterleaveDatasetV4": "interleave", "BatchDatasetV2": "batch",
        "ParallelMapDatasetV2": "map", "CacheDatasetV2": "cache", "PrefetchDataset": "prefetch",
        "AssertCardinalityDataset": "cardinality", "OptionsDataset": "options",
        "UnbatchDataset": "unbatch", "RebatchDatasetV2": "rebatch", "RandomDataset": "random",
        "ZipDataset": "zip",
    }
    # a plain MapDataset would be a reshaping step: ours are all ParallelMapDatasetV2
    ops = [n.op for n in _graph(ds).node if "Dataset" in n.op and n.op != "MapDataset"]
    return [names.get(op, op) for op in ops]


def _functions_ops(ds: tf.data.Dataset) -> set[str]:
    return {n.op for f in _graph(ds).library.function for n in f.node_def}


def _rows(batches) -> list[tuple]:
    out = []
    for features, label in batches:
        cols = {k: v.numpy() for k, v in features.items()}
        for i, y in enumerate(label.numpy().reshape(-1)):
            out.append(tuple(_py(cols[k][i]) for k in sorted(cols)) + (int(y),))
    return out


def _py(value):
    if isinstance(value, (bytes, str)):
        return value.decode() if isinstance(value, bytes) else value
    return round(float(value), 4)


def _expected(rows: list[dict]) -> list[tuple]:
    keys = sorted(fx.FEATURES)
    return [tuple(_py(r[k]) for k in keys) + (r["late"],) for r in rows]


def test_training_order_shuffles_chunks_then_permutes_parsed_windows(version):
    """files shuffled -> interleave (chunks) -> chunk shuffle -> repeat -> windows -> (zip with
    per-window seeds) parse + permute -> batches -> feature map -> prefetch; no per-record
    stage (unbatch, record shuffle) anywhere."""
    ds = make_dataset(version.uri, "train", version.typed, InputConfig(batch_size=64))
    assert _stages(ds) == ["files", "shuffle", "interleave", "shuffle", "repeat", "rebatch",
                           "random", "batch", "zip", "map", "rebatch", "cardinality", "map",
                           "prefetch", "options"]
    ops = _functions_ops(ds)
    assert "StatelessShuffle" in ops
    assert "ParseExampleV2" in ops and "ParseSingleExample" not in ops  # vectorized parse
    assert "TFRecordDataset" in ops
    assert ds.cardinality() == tf.data.INFINITE_CARDINALITY
    unshuffled = make_dataset(version.uri, "train", version.typed,
                              InputConfig(batch_size=64, shuffle_buffer=0))
    assert _stages(unshuffled) == ["files", "shuffle", "interleave", "repeat", "rebatch",
                                   "cardinality", "map", "map", "prefetch", "options"]
    assert unshuffled.cardinality() == tf.data.INFINITE_CARDINALITY


def test_eval_order_has_no_shuffle_or_repeat_and_a_known_length(version):
    ds = make_dataset(version.uri, "eval", version.typed, InputConfig(batch_size=50))
    assert _stages(ds) == ["files", "interleave", "rebatch", "cardinality", "map", "map",
                           "prefetch", "options"]
    assert int(ds.cardinality()) == -(-len(version.rows["eval"]) // 50)
    assert ds.options().deterministic is True


def test_cache_sits_after_parse_and_before_batch_reshuffle_and_repeat(version):
    ds = make_dataset(version.uri, "train", version.typed,
                      InputConfig(batch_size=64, cache="memory", shuffle_buffer=256))
    assert _stages(ds) == ["files", "shuffle", "interleave", "shuffle", "rebatch", "random",
                           "batch", "zip", "map", "rebatch", "map", "cache", "shuffle", "repeat",
                           "prefetch", "options"]


def test_file_cache_goes_under_the_version_and_serves_the_same_batches(version, tmp_path: Path):
    cfg = InputConfig(batch_size=100, cache=str(tmp_path / "cache"))
    first = _rows(make_dataset(version.uri, "test", version.typed, cfg))
    assert list((tmp_path / "cache" / "flights" / fx.VERSION).glob("test-eval*.index"))
    assert _rows(make_dataset(version.uri, "test", version.typed, cfg)) == first


def test_knobs_reach_tf_data_options(version):
    cfg = InputConfig(batch_size=32, ram_budget_bytes=256 * 2**20, private_threadpool_size=3, seed=5)
    opts = make_dataset(version.uri, "train", version.typed, cfg).options()
    assert opts.autotune.enabled and opts.autotune.ram_budget == 256 * 2**20
    assert opts.threading.private_threadpool_size == 3
    assert opts.deterministic is True  # seeded
    unseeded = make_dataset(version.uri, "train", version.typed, InputConfig()).options()
    assert unseeded.deterministic is False  # interleave may return out of order for speed


def test_seeded_training_order_is_reproducible(version):
    def first_batches(seed: int) -> list[tuple]:
        cfg = InputConfig(batch_size=64, seed=seed, shuffle_buffer=500)
        return _rows(make_dataset(version.uri, "train", version.typed, cfg).take(4))

    a, b, c = first_batches(7), first_batches(7), first_batches(8)
    assert a == b
    assert a != c
    assert sorted(a) != a  # actually shuffled


def test_a_shuffled_epoch_holds_every_record_once_in_batches_of_the_asked_size(version):
    """The permuted windows lose, double or alter no record, and cut into full batches."""
    cfg = InputConfig(batch_size=64, seed=3, shuffle_buffer=300, read_chunk=50, cache="memory")
    n = len(version.rows["train"])
    ds = make_dataset(version.uri, "train", version.typed, cfg)
    sizes = [int(label.shape[0]) for _, label in ds.take(-(-n // 64))]
    assert sizes.count(64) == n // 64 and sum(sizes) == n  # one short batch at most
    epoch = _rows(ds.take(-(-n // 64)))
    assert sorted(epoch) == sorted(_expected(version.rows["train"]))
    assert epoch != _expected(version.rows["train"])


def test_parsed_values_equal_the_written_records(version):
    ds = make_dataset(version.uri, "test", version.typed, InputConfig(batch_size=64))
    assert _rows(ds) == _expected(version.rows["test"])  # one shard: file order is kept
    specs = feature_specs(version.typed)
    assert specs["carrier"].dtype == tf.string and specs["plane_seats"].dtype == tf.int64
    # every training record once per pass, none lost or doubled across the 3 shards
    train = make_dataset(version.uri, "train", version.typed, InputConfig(batch_size=64),
                         training=False)
    assert sorted(_rows(train)) == sorted(_expected(version.rows["train"]))


def test_gzip_shards_are_read(tmp_path: Path):
    v = fx.write_version(tmp_path, n=300, compression="gzip")
    ds = make_dataset(v.uri, "eval", v.typed, InputConfig(batch_size=16))
    assert _rows(ds) == _expected(v.rows["eval"])


def test_unknown_feature_kind_is_named(version):
    manifest = fx.typed({**version.manifest, "schema": {
        **version.manifest["schema"],
        "features": {**version.manifest["schema"]["features"], "photo": {"dtype": "string", "kind": "image"}},
    }})
    with pytest.raises(ValueError, match="'photo' has kind 'image'"):
        make_dataset(version.uri, "eval", manifest)


def test_incomplete_version_is_refused(version, tmp_path: Path):
    from etl.errors import IncompleteVersionError

    half = tmp_path / "datasets" / "flights" / "20130103T000000Z_all"
    half.mkdir(parents=True)
    (half / "flights-train.tfrecord-00000-of-00001").write_bytes(b"")
    with pytest.raises(IncompleteVersionError):
        make_dataset(half.as_uri(), "train")


# --- staging --------------------------------------------------------------------------------------

STAGED_VERSION = "20130102T000000Z_20130101T000000Z"


def _byte_version(root: Path, sizes: dict[str, list[int]]) -> tuple[str, dict]:
    """A version folder with random-byte shards and the manifest entries describing them."""
    path = root / "datasets" / "flights" / STAGED_VERSION
    path.mkdir(parents=True)
    splits = {}
    for split, shard_sizes in sizes.items():
        entries = []
        for i, size in enumerate(shard_sizes):
            name = f"flights-{split}.tfrecord-{i:05d}-of-{len(shard_sizes):05d}"
            data = hashlib.sha256(f"{split}{i}".encode()).digest() * (size // 32 + 1)
            (path / name).write_bytes(data[:size])
            entries.append({"file": name, "records": 1, "bytes": size,
                            "sha256": hashlib.sha256(data[:size]).hexdigest()})
        splits[split] = {"num_examples": len(entries), "shards": entries}
    return path.as_uri(), {"dataset": "flights", "version": STAGED_VERSION, "splits": splits}


@pytest.fixture
def shards(tmp_path: Path) -> tuple[str, dict]:
    return _byte_version(tmp_path / "store", {"train": [70_000, 50_000, 1], "eval": [3_000]})


def test_stage_copies_only_the_asked_splits_and_verifies(shards, tmp_path: Path) -> None:
    uri, manifest = shards
    local = tabular.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"], workers=2)
    assert local == tmp_path / "ssd" / "flights" / STAGED_VERSION
    names = sorted(p.name for p in local.iterdir())
    assert names == sorted(e["file"] for e in manifest["splits"]["train"]["shards"])
    for entry in manifest["splits"]["train"]["shards"]:
        assert tabular.mismatch(local / entry["file"], _shard(entry)) is None


def test_verified_copy_is_reused_and_corrupted_copy_refetched(shards, tmp_path, caplog) -> None:
    uri, manifest = shards
    entry = manifest["splits"]["train"]["shards"][0]
    local = tabular.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"])
    assert tabular.stage_shard(uri, local, _shard(entry)) is False  # verified copy: not fetched again

    shard = local / entry["file"]
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0xFF  # same size, one flipped byte: only the checksum can tell
    shard.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="training.data.tabular"):
        tabular.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train"])
    assert entry["file"] in caplog.text and "sha256" in caplog.text
    assert tabular.mismatch(shard, _shard(entry)) is None

    shard.write_bytes(shard.read_bytes()[:-10])  # truncated copy
    assert tabular.stage_shard(uri, local, _shard(entry)) is True
    assert tabular.mismatch(shard, _shard(entry)) is None


def test_damaged_source_shard_is_refused_with_its_name(shards, tmp_path: Path) -> None:
    uri, manifest = shards
    entry = manifest["splits"]["eval"]["shards"][0]
    source = Path(uri[len("file://"):]) / entry["file"]
    source.write_bytes(b"x" + source.read_bytes()[1:])
    with pytest.raises(ChecksumMismatchError, match=entry["file"]):
        tabular.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["eval"])
    local = tmp_path / "ssd" / "flights" / STAGED_VERSION
    assert list(local.iterdir()) == []  # no half or wrong file left behind, not even a temp


def test_bad_manifest_entries_are_named(shards) -> None:
    _, manifest = shards
    with pytest.raises(KeyError, match="no split 'test'"):
        tabular.split_shards(_m(manifest), "test")
    manifest["splits"]["eval"]["shards"][0]["file"] = "../escape"
    with pytest.raises(ValueError, match="plain file name"):
        tabular.split_shards(_m(manifest), "eval")
    del manifest["splits"]["train"]["shards"][0]["sha256"]
    with pytest.raises(ValueError, match="missing \\['sha256'\\]"):
        tabular.split_shards(_m(manifest), "train")


def _m(manifest: dict) -> Manifest:
    return Manifest.from_json(manifest, "the test's manifest")


def _shard(entry: dict) -> Shard:
    return Shard.from_json(entry, "the test's manifest")


def _as_segments(uri: str, manifest: dict) -> None:
    """Move each shard into a segment folder beside the version, as composed versions list them."""
    version_dir = Path(uri[len("file://"):])
    for split, info in manifest["splits"].items():
        for i, entry in enumerate(info["shards"]):
            segment = f"20130101T000000Z_{split}{i}"
            folder = version_dir.parent / "segments" / segment
            folder.mkdir(parents=True)
            (version_dir / entry["file"]).rename(folder / entry["file"])
            entry["segment"] = segment


def test_shards_in_shared_segments_are_verified_and_staged(shards, tmp_path) -> None:
    from etl import versions

    uri, manifest = shards
    _as_segments(uri, manifest)
    assert versions.verify_shards(uri, _m(manifest)) == 4
    local = tabular.stage_version(uri, _m(manifest), str(tmp_path / "ssd"), ["train", "eval"])
    staged = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert staged == sorted(versions.shard_relpath(_shard(e)) for s in ("train", "eval")
                            for e in manifest["splits"][s]["shards"])
    assert all(p.startswith("segments/") for p in staged)
    entry = manifest["splits"]["eval"]["shards"][0]
    (Path(uri[len("file://"):]).parent / versions.shard_relpath(_shard(entry))).write_bytes(b"damaged")
    with pytest.raises(ChecksumMismatchError, match=entry["segment"]):
        versions.verify_shards(uri, _m(manifest))


@pytest.mark.parametrize("segment", ["../escape", "a/b", "", ".."])
def test_a_segment_outside_the_dataset_is_refused(shards, segment) -> None:
    _, manifest = shards
    manifest["splits"]["eval"]["shards"][0]["segment"] = segment
    with pytest.raises(ValueError, match="segment .* must be a plain file name"):
        tabular.split_shards(_m(manifest), "eval")
