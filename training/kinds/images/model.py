"""The image model: a small Keras CNN over decoded, augmented images in [0, 1]."""

from __future__ import annotations

import keras

from etl.versions import Manifest
from etl.versions.segment import Statistics
from training.kinds.images.config import ImageTrainConfig
from training.models.tabular import Head


def build_cnn(shape: tuple[int, int, int], manifest: Manifest, config: ImageTrainConfig,
              head: Head) -> keras.Model:
    """Conv blocks (two 3x3 convs, then 2x2 pooling while the map is > 4 px), a dense layer,
    then the label task's ``head`` (``training.tasks``: softmax over the manifest's classes).
    Uncompiled: the task names the loss and metrics."""
    inputs = keras.Input(shape=shape, name="image")
    x, side = inputs, min(shape[0], shape[1])
    for filters in config.filters:
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        if side > 4:
            x = keras.layers.MaxPooling2D(2)(x)
            side //= 2
    x = keras.layers.Flatten()(x) if side <= 8 else keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(config.dense_units, activation="relu")(x)
    x = keras.layers.Dropout(config.dropout)(x)
    outputs = head(x, manifest.schema, manifest.statistics or Statistics(), None)
    return keras.Model(inputs, outputs, name="image_cnn")
