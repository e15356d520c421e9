"""Shards out: Examples encoded in bulk, TFRecord shards sized by bytes.

Modules: ``encode`` (Arrow columns to serialized tf.train.Example), ``shards`` (shard names
and sizes, TFRecord framing), ``writer`` (one Dask task per shard, straight to storage) and
``tfds`` (a segment's ``dataset_info.json``, so stock ``tfds.builder_from_directories`` loads a
version over the segments its manifest lists).
"""
