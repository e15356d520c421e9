"""Input pipelines: published shards to batches for Keras, and staging shards to local disk.

Modules: ``tabular`` (manifest-driven tf.data over TFRecord shards), ``images`` (decode and
augment inside tf.data) and ``staging`` (checksum-verified copies on a GPU node's disk).
"""
