"""Shards out: Examples encoded in bulk, TFRecord shards sized by bytes.

Modules: ``encode`` (Arrow columns to serialized tf.train.Example), ``shards`` (shard names
and sizes, TFRecord framing) and ``writer`` (one Dask task per shard, straight to storage).
TFDS reads the shards through ``training.data.tfds``, which needs no file of ours.
"""
