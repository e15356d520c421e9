"""The tf.data input pipeline, built from a version's manifest.

Order (training): shuffle the shard list -> interleave TFRecord readers, each handing over
chunks of records -> shuffle the chunks -> repeat -> pools of ``shuffle_buffer`` records ->
``parse_example`` on the whole pool, then a random permutation of its rows -> batches ->
feature map -> [cache] -> prefetch. Eval/test: fixed shard order, deterministic, no shuffle,
no repeat: chunks -> batches -> ``parse_example`` -> feature map.

Records are never handled one at a time: ``rebatch`` slices chunks into pools and pools
into batches, and parsing is vectorized C++ over thousands of records. A per-record
``shuffle`` buffer (plus the ``unbatch`` and ``batch`` around it) cost about a third more CPU
per example than the whole bare read-and-parse path (session 7, PERFORMANCE.md). Shuffling
chunks and then permuting each pool uniformly mixes examples within a pool completely
and across pools through the chunk shuffle and the per-epoch shard order; the shards
themselves are written in key-hash order, uncorrelated with time or label.

With ``cache`` set, the cache sits after the expensive parse, and shuffling then repeating
move after it (batch-level reshuffle each epoch): a cache before ``repeat`` is the only
placement that ever completes, and one after the permutation would freeze its order.

With ``staging_dir`` set (or against a GCS emulator), the split's shards are first copied to
local disk and verified against the manifest's checksums (``stage_version``, below).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tensorflow as tf

from etl import storage, versions
from etl.errors import ChecksumMismatchError
from etl.versions import Manifest, Shard
from training.config import AUTOTUNE, CACHE_MEMORY, InputConfig

log = logging.getLogger(__name__)

_DTYPES = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}
_COMPRESSION = {None: None, "": None, "none": None, "gzip": "GZIP", "zlib": "ZLIB"}
TABULAR_KINDS = ("numeric", "categorical")
IMAGE_KIND = "image"  # a feature of an images version, read by training.kinds.images.data


def feature_specs(manifest: Manifest) -> dict[str, tf.io.FixedLenFeature]:
    """``FixedLenFeature`` per feature and for the label: the ETL fills every value.

    Raises:
        ValueError: a feature has a dtype or kind this pipeline cannot parse (names it).
    """
    schema = manifest.schema
    specs = {}
    for name, feat in schema.features.items():
        if feat.kind not in TABULAR_KINDS:
            raise ValueError(
                f"manifest {manifest.dataset}/{manifest.version}: feature {name!r} "
                f"has kind {feat.kind!r}; this pipeline reads {TABULAR_KINDS}"
            )
        specs[name] = tf.io.FixedLenFeature([], _dtype(name, feat.dtype))
    label = schema.label
    specs[label.name] = tf.io.FixedLenFeature([], _dtype(label.name, label.dtype))
    return specs


def compression_type(manifest: Manifest) -> str | None:
    """TFRecord compression name for TensorFlow from the manifest's ``compression``."""
    value = manifest.compression
    key = value.lower() if isinstance(value, str) else value
    if key not in _COMPRESSION:
        raise ValueError(f"manifest compression {value!r}: expected one of None, 'gzip', 'zlib'")
    return _COMPRESSION[key]


def local_or_remote_path(uri: str) -> str:
    """A path TensorFlow's filesystems open: gs:// as is (TF's GCS client), else the local
    path etl.storage resolves the URI to."""
    return uri if storage.is_gcs(uri) else storage.get_fs(uri)[1]


def emulator_staging_dir(version_uri: str) -> str | None:
    """A local staging folder when gs:// means a GCS emulator, else None.

    TensorFlow's own GCS client has no endpoint override and ignores STORAGE_EMULATOR_HOST, so
    against an emulator (the compose deployment's) it would call storage.googleapis.com: stage
    the shards with gcsfs, which honours the emulator, and read them locally.
    """
    if storage.is_gcs(version_uri) and os.environ.get("STORAGE_EMULATOR_HOST"):
        return os.path.join(tempfile.gettempdir(), "flightpipe-staging")
    return None


def shard_files(
    version_uri: str, split: str, manifest: Manifest, config: InputConfig | None = None
) -> list[str]:
    """Paths of ``split``'s shards: a verified local staging copy, or the version's own URIs."""
    config = config or InputConfig()
    entries = split_shards(manifest, split)
    if not entries:
        raise ValueError(f"{version_uri}: split {split!r} has no shards in the manifest")
    staging_dir = config.staging_dir or emulator_staging_dir(version_uri)
    if staging_dir:
        local = stage_version(
            version_uri, manifest, staging_dir, [split], config.staging_workers
        )
        return [str(local / versions.shard_relpath(e)) for e in entries]
    return [local_or_remote_path(versions.shard_uri(version_uri, e)) for e in entries]


def make_dataset(
    version_uri: str,
    split: str,
    manifest: Manifest | None = None,
    config: InputConfig | None = None,
    training: bool | None = None,
    preprocess: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]] | None = None,
    target: Callable[[tf.Tensor], tf.Tensor] | None = None,
) -> tf.data.Dataset:
    """Batches of ``(feature dict, label [B, 1] float32)`` for one split.

    Args:
        version_uri: A published version (``file://`` or ``gs://``).
        split: "train", "eval" or "test".
        manifest: The version's manifest; read (and completeness checked) when None.
        config: Pipeline knobs; None = the defaults.
        training: Shuffle and repeat forever; default: ``split == "train"``.
        preprocess: Applied to each batch of raw features in the parallel feature map
            (the model's preprocessing part); None keeps the raw values.
        target: The label task's encoding of the float32 label (e.g. log1p of a regression
            target); None keeps it as stored.

    Raises:
        IncompleteVersionError: the version has no manifest.json.
    """
    if manifest is None:
        from etl.versions import read_manifest

        manifest = read_manifest(version_uri)
    config = config or InputConfig()
    training = split == "train" if training is None else training
    deterministic = config.seed is not None or not training
    files = shard_files(version_uri, split, manifest, config)
    ds = read_chunks(files, compression_type(manifest), config, training, deterministic)
    parse = parse_batch(manifest)
    drop = training and config.drop_remainder
    if training and config.shuffle_buffer:
        ds = shuffled_pools(ds, parse, config, repeat=not config.cache)
        ds = _with_length(ds.rebatch(config.batch_size, drop_remainder=drop), manifest, split,
                          config, training)
    else:
        if training and not config.cache:
            ds = ds.repeat()
        ds = _with_length(ds.rebatch(config.batch_size, drop_remainder=drop), manifest, split,
                          config, training)
        ds = ds.map(parse, num_parallel_calls=config.map_parallel_calls)
    ds = ds.map(feature_map(manifest, preprocess, target),
                num_parallel_calls=config.map_parallel_calls)
    if config.cache:
        ds = _cached(ds, manifest, split, config, training)
    ds = ds.prefetch(config.prefetch)
    return ds.with_options(pipeline_options(config, deterministic))


def parse_batch(manifest: Manifest) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """``parse_example`` of a vector of serialized records into the manifest's features."""
    specs = feature_specs(manifest)
    return lambda records: tf.io.parse_example(records, specs)


def shuffled_pools(chunks: tf.data.Dataset, parse: Callable, config: InputConfig,
                     repeat: bool = True) -> tf.data.Dataset:
    """Parsed pools of ``shuffle_buffer`` examples, each in a uniformly random row order.

    The chunks pass a shuffle buffer of ``shuffle_buffer / read_chunk`` chunks first, so a
    pool draws from about twice its size of the stream. Each pool's permutation comes
    from a stateless shuffle seeded by ``Dataset.random(config.seed)``: reproducible with a
    seed, different each epoch either way.
    """
    chunk_buffer = max(2, config.shuffle_buffer // config.read_chunk)
    ds = chunks.shuffle(chunk_buffer, seed=config.seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.rebatch(config.shuffle_buffer)
    seeds = tf.data.Dataset.random(seed=config.seed).batch(2)

    def parse_and_permute(records: tf.Tensor, seed: tf.Tensor) -> dict[str, tf.Tensor]:
        order = tf.random.experimental.stateless_shuffle(tf.range(tf.size(records)), seed=seed)
        return {name: tf.gather(column, order) for name, column in parse(records).items()}

    return tf.data.Dataset.zip(ds, seeds).map(parse_and_permute,
                                              num_parallel_calls=config.map_parallel_calls)


def read_chunks(
    files: list[str],
    compression: str | None,
    config: InputConfig,
    training: bool,
    deterministic: bool,
) -> tf.data.Dataset:
    """Vectors of up to ``read_chunk`` serialized records, read from ``cycle_length`` shards
    at once.

    A parallel interleave pays a thread hand-off per element, which one record at a time
    made cost more CPU than reading (measured ~6-10 us vs ~2 us per record); downstream,
    ``rebatch`` cuts these chunks into batches without touching records one by one.
    """
    files_ds = tf.data.Dataset.from_tensor_slices(files)
    if training and config.shuffle_files:
        files_ds = files_ds.shuffle(len(files), seed=config.seed, reshuffle_each_iteration=True)
    cycle = config.cycle_length
    if cycle == AUTOTUNE:
        cycle = max(1, min(len(files), len(os.sched_getaffinity(0))))
    return files_ds.interleave(
        lambda f: tf.data.TFRecordDataset(
            f, compression_type=compression, buffer_size=config.read_buffer_bytes
        ).batch(config.read_chunk),
        cycle_length=min(cycle, len(files)),
        block_length=config.block_length,
        num_parallel_calls=config.num_parallel_reads,
        deterministic=deterministic,
    )


def feature_map(manifest: Manifest, preprocess: Callable | None = None,
                target: Callable | None = None) -> Callable:
    """Split the label off (float32 [B, 1], ``target`` applied) and, if given, run the
    model's preprocessing on the batch."""
    label = manifest.schema.label.name

    def split_label(batch: dict[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        features = dict(batch)
        y = features.pop(label)
        if preprocess is not None:
            features = preprocess(features)
        y = tf.expand_dims(tf.cast(y, tf.float32), -1)
        return features, target(y) if target is not None else y

    return split_label


def pipeline_options(config: InputConfig, deterministic: bool) -> tf.data.Options:
    """Autotuning with the configured RAM budget; determinism only when it was asked for."""
    opts = tf.data.Options()
    opts.deterministic = deterministic
    opts.autotune.enabled = True
    if config.ram_budget_bytes:
        opts.autotune.ram_budget = config.ram_budget_bytes
    if config.private_threadpool_size:
        opts.threading.private_threadpool_size = config.private_threadpool_size
    opts.experimental_optimization.map_fusion = True
    return opts


def _cached(
    ds: tf.data.Dataset, manifest: Manifest, split: str, config: InputConfig, training: bool
) -> tf.data.Dataset:
    """Cache parsed batches; training then reshuffles whole batches each epoch and repeats."""
    if config.cache == CACHE_MEMORY:
        ds = ds.cache()
    else:
        folder = os.path.join(config.cache, manifest.dataset, manifest.version)
        os.makedirs(folder, exist_ok=True)
        ds = ds.cache(os.path.join(folder, f"{split}-{'train' if training else 'eval'}"))
    if training:
        batches = max(1, config.shuffle_buffer // config.batch_size)
        ds = ds.shuffle(batches, seed=config.seed, reshuffle_each_iteration=True).repeat()
    return ds


def _with_length(ds: tf.data.Dataset, manifest: Manifest, split: str,
                 config: InputConfig, training: bool) -> tf.data.Dataset:
    """State the batch count ``rebatch`` hides: Keras sizes its loops by it (a repeating
    stream is infinite), and an eval shard shorter than its manifest says fails loudly."""
    if not training:
        examples = sum(int(e.records or 0) for e in split_shards(manifest, split))
        return ds.apply(tf.data.experimental.assert_cardinality(-(-examples // config.batch_size)))
    if not config.cache:
        return ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    return ds


def _dtype(name: str, dtype: str) -> tf.DType:
    if dtype not in _DTYPES:
        raise ValueError(f"feature {name!r}: dtype {dtype!r} is not one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]

# --- staging --------------------------------------------------------------------------------------
#
# Copy a version's shards to local disk, verified against the manifest's checksums.
#
# A GPU node reads its epochs from local SSD instead of the object store: each shard is
# streamed once (hashing while it downloads), made visible under its final name only when
# size and sha256 match the manifest, and reused by later runs after a fresh re-check, so a
# corrupted or truncated local copy is fetched again instead of being trained on.

BLOCK_BYTES = 8 * 2**20


def split_shards(manifest: Manifest, split: str) -> tuple[Shard, ...]:
    """The manifest's shard entries for ``split``.

    Raises:
        KeyError: the split is not in the manifest (names the splits it has).
    """
    if split not in manifest.splits:
        raise KeyError(
            f"manifest of {manifest.dataset}/{manifest.version} has no split "
            f"{split!r}; it has {sorted(manifest.splits)}"
        )
    shards = manifest.splits[split].shards
    for entry in shards:
        _check_entry(entry)
    return shards


def stage_version(
    version_uri: str,
    manifest: Manifest,
    staging_dir: str,
    splits: list[str],
    workers: int = 8,
) -> Path:
    """Make a verified local copy of ``splits``' shards; returns the local version folder.

    Raises:
        ChecksumMismatchError: a freshly fetched shard still differs from the manifest
            (the stored version itself is damaged); names the shard.
    """
    local = Path(staging_dir) / manifest.dataset / manifest.version
    local.mkdir(parents=True, exist_ok=True)
    entries = [e for s in splits for e in split_shards(manifest, s)]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(entries) or 1))) as pool:
        fetched = list(pool.map(lambda e: stage_shard(version_uri, local, e), entries))
    log.info(
        "staged %s/%s into %s: %d shards, %d fetched, %d reused after verification",
        manifest.dataset, manifest.version, local, len(entries), sum(fetched),
        len(entries) - sum(fetched),
    )
    return local


def stage_shard(version_uri: str, local_dir: Path, entry: Shard) -> bool:
    """Ensure ``local_dir/<shard path>`` is a verified copy; True when it had to be fetched."""
    dst = local_dir / versions.shard_relpath(entry)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        problem = mismatch(dst, entry)
        if problem is None:
            return False
        log.warning("staged copy %s is not what the manifest lists (%s): fetching it again", dst, problem)
        dst.unlink()
    src = versions.shard_uri(version_uri, entry)
    if storage.is_gcs(src):
        storage.with_retries(lambda: _download(src, dst, entry), f"stage {src}")
    else:
        _download(src, dst, entry)
    return True


def mismatch(path: Path, entry: Shard) -> str | None:
    """Why the local file differs from its manifest entry, or None when it matches."""
    size = path.stat().st_size
    if size != entry.bytes:
        return f"size {size} != manifest {entry.bytes}"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK_BYTES):
            digest.update(block)
    if digest.hexdigest() != entry.sha256:
        return f"sha256 {digest.hexdigest()} != manifest {entry.sha256}"
    return None


def _download(src: str, dst: Path, entry: Shard) -> None:
    """Stream ``src`` to a temp file while hashing; publish it under ``dst`` only if it matches."""
    fs, path = storage.get_fs(src)
    tmp = dst.with_name(f".{dst.name}{storage.TEMP_MARKER}{uuid.uuid4().hex}")
    digest, size = hashlib.sha256(), 0
    try:
        with fs.open(path, "rb", block_size=BLOCK_BYTES) as fin, open(tmp, "wb") as fout:
            while block := fin.read(BLOCK_BYTES):
                digest.update(block)
                size += len(block)
                fout.write(block)
        if size != entry.bytes or digest.hexdigest() != entry.sha256:
            raise ChecksumMismatchError(
                f"{src}: fetched {size} bytes with sha256 {digest.hexdigest()}, but the manifest "
                f"lists {entry.bytes} bytes with sha256 {entry.sha256}: the stored shard "
                "is damaged; refusing to train on it"
            )
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()


def _check_entry(entry: Shard) -> None:
    """Shard entries name plain files in the version or a segment; else a bad manifest."""
    missing = [k for k, v in (("bytes", entry.bytes), ("sha256", entry.sha256)) if v is None]
    if missing:
        raise ValueError(f"manifest shard entry {entry.to_json()!r}: missing {missing}")
    versions.shard_relpath(entry)  # raises ValueError naming the entry
