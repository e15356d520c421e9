"""The images kind: decode and augment inside tf.data (``data``), a small Keras CNN (``model``)
and the run that fits, judges and publishes it with the multiclass task (``train``)."""
