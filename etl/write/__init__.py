"""Shards out: Examples encoded in bulk, TFRecord shards sized by bytes, TFDS metadata.

Modules: ``encode`` (Arrow columns to serialized tf.train.Example), ``shards`` (shard names
and sizes, TFRecord framing), ``writer`` (one Dask task per shard, straight to storage) and
``tfds`` (dataset_info.json / features.json so ``tfds.builder_from_directory`` loads a version).
"""
