"""Input pipelines: published shards to batches for Keras, staged to local disk first if asked.

Modules: ``tabular`` (manifest-driven tf.data over TFRecord shards, and checksum-verified copies
of them on a GPU node's disk) and ``tfds`` (a version as a stock TFDS builder). An images
version's pipeline is its kind's own (``training.kinds.images.data``).
"""
