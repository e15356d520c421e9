"""Image versions: decode + augment inside tf.data, a small Keras CNN, the same gate and outputs.

Input order (training): shuffle shard list -> interleave readers -> batch -> ``parse_example``
on the batch (vectorized) -> decode each image of the batch (``map_fn``: decoders take one
image) -> unbatch -> cache (decoded uint8, BEFORE augmentation, so every epoch draws new
augmentations from cached pixels) -> shuffle -> repeat -> batch -> augment the whole batch
with per-image random factors (flip, brightness, contrast; saturation and hue on RGB) and
resize -> prefetch. Every map runs with AUTOTUNE parallelism. Random draws are stateless,
seeded from ``Dataset.random``, so a fixed seed gives the same batches.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from etl.versions import Manifest
from etl.versions.segment import FeatureSchema
from training.config import AUTOTUNE
from training.data.tabular import (
    IMAGE_KIND,
    compression_type,
    pipeline_options,
    read_chunks,
    shard_files,
)
from training.kinds.images.config import ImageTrainConfig

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Augment:
    """Random per-image changes; the manifest's ``augment`` hints (from the spec) override."""

    flip_left_right: bool = True
    max_brightness_delta: float = 0.1
    contrast_range: tuple[float, float] = (0.8, 1.2)
    saturation_range: tuple[float, float] = (0.8, 1.2)  # RGB only
    max_hue_delta: float = 0.05  # RGB only


def image_feature(manifest: Manifest) -> tuple[str, FeatureSchema] | None:
    """(name, spec) of the manifest's image feature, or None for a tabular version."""
    for name, feat in manifest.schema.features.items():
        if feat.kind == IMAGE_KIND:
            return name, feat
    return None


def augment_config(manifest: Manifest) -> Augment:
    hints = dict(image_feature(manifest)[1].augment or {})
    for k in ("contrast_range", "saturation_range"):
        if k in hints:
            hints[k] = tuple(hints[k])
    return dataclasses.replace(Augment(), **hints)


def _decode_batch(name: str, label: str, shape: list, encoding: str):
    """parse_example on a batch of records, then decode each image to uint8 [B, H, W, C]."""
    h, w, c = shape
    specs = {name: tf.io.FixedLenFeature([], tf.string), label: tf.io.FixedLenFeature([], tf.int64)}
    decode = tf.io.decode_png if encoding == "png" else tf.io.decode_jpeg

    def fn(records: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_example(records, specs)
        images = tf.map_fn(lambda b: tf.ensure_shape(decode(b, channels=c), [h, w, c]),
                           parsed[name], fn_output_signature=tf.TensorSpec([h, w, c], tf.uint8))
        return images, parsed[label]

    return fn


def _augment_batch(aug: Augment, size: tuple[int, int], channels: int, training: bool):
    """uint8 batch -> float32 [0, 1], per-image random factors (training), resized."""

    def fn(images: tf.Tensor, labels: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        x = tf.image.convert_image_dtype(images, tf.float32)
        if training:
            x = _random_changes(x, aug, channels, seed)
        if tuple(x.shape[1:3]) != tuple(size):
            x = tf.image.resize(x, size, antialias=True)
        return x, labels

    return fn


def _random_changes(x: tf.Tensor, aug: Augment, channels: int, seed: tf.Tensor) -> tf.Tensor:
    b = tf.shape(x)[0]
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 5)

    def draw(i: int, lo: float, hi: float, shape: Any = None) -> tf.Tensor:
        return tf.random.stateless_uniform(shape if shape is not None else [b, 1, 1, 1],
                                           seeds[i], lo, hi)

    if aug.flip_left_right:
        x = tf.where(draw(0, 0.0, 1.0) < 0.5, tf.reverse(x, axis=[2]), x)
    if aug.max_brightness_delta:
        x = x + draw(1, -aug.max_brightness_delta, aug.max_brightness_delta)
    if aug.contrast_range != (1.0, 1.0):
        mean = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
        x = (x - mean) * draw(2, *aug.contrast_range) + mean
    if channels == 3:
        hsv = tf.image.rgb_to_hsv(tf.clip_by_value(x, 0.0, 1.0))
        hue = tf.math.floormod(
            hsv[..., 0] + draw(3, -aug.max_hue_delta, aug.max_hue_delta, [b, 1, 1]), 1.0)
        sat = tf.clip_by_value(hsv[..., 1] * draw(4, *aug.saturation_range, [b, 1, 1]), 0.0, 1.0)
        x = tf.image.hsv_to_rgb(tf.stack([hue, sat, hsv[..., 2]], axis=-1))
    return tf.clip_by_value(x, 0.0, 1.0)


def make_image_dataset(version_uri: str, split: str, manifest: Manifest,
                       config: ImageTrainConfig, training: bool | None = None) -> tf.data.Dataset:
    """Batches of ``(float32 images [B, H, W, C] in [0, 1], int64 labels [B])`` for one split."""
    from training.config import InputConfig

    training = split == "train" if training is None else training
    name, feat = image_feature(manifest)
    h, w, c = feat.shape
    if h is None or w is None:
        raise ValueError(f"{version_uri}: image feature {name!r} has shape {feat.shape}; "
                         "training needs a fixed size (set image.resize in the spec)")
    icfg = InputConfig(batch_size=config.batch_size, seed=config.seed)
    files = shard_files(version_uri, split, manifest, icfg)
    ds = read_chunks(files, compression_type(manifest), icfg, training, deterministic=True)
    ds = ds.map(
        _decode_batch(name, manifest.schema.label.name, feat.shape, feat.encoding),
        num_parallel_calls=AUTOTUNE).unbatch()
    if config.cache:
        ds = ds.cache()  # decoded pixels; augmentation below stays random per epoch
    if training:
        ds = ds.shuffle(config.shuffle_buffer, seed=config.seed, reshuffle_each_iteration=True)
        ds = ds.repeat()
    ds = ds.batch(config.batch_size)
    ds = tf.data.Dataset.zip((ds, tf.data.Dataset.random(seed=config.seed).batch(2)))
    size = config.image_size or (h, w)
    aug_fn = _augment_batch(augment_config(manifest), size, c, training)
    ds = ds.map(lambda xy, s: aug_fn(xy[0], xy[1], s), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE).with_options(pipeline_options(icfg, deterministic=True))
