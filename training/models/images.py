"""The image model: a small Keras CNN over decoded, augmented images in [0, 1]."""

from __future__ import annotations

import keras

from training.config import ImageTrainConfig


def build_cnn(shape: tuple[int, int, int], classes: int, config: ImageTrainConfig) -> keras.Model:
    """Conv blocks (two 3x3 convs, then 2x2 pooling while the map is > 4 px), dense head."""
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
    outputs = keras.layers.Dense(classes, activation="softmax", dtype="float32", name="label")(x)
    model = keras.Model(inputs, outputs, name="image_cnn")
    model.compile(optimizer=keras.optimizers.Adam(config.learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model
