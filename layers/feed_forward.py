"""A dense feed-forward network: the one always-used "expert" of Shazeer et al.'s MoE-1-Wide and
MoE-1-Deep baselines (Appendix C.1), which stand in for a mixture at the same computation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from zoo.layers.validation import check_int


@keras.saving.register_keras_serializable(package="zoo")
class FeedForward(keras.layers.Layer):
    """ReLU layers of `hidden_units`, then a linear layer of `output_units`; any input rank.

    Args:
        hidden_units: the widths of the ReLU layers, bottom first (may be empty).
        output_units: the width of the linear output layer.

    Example:

    >>> import numpy as np
    >>> from zoo.layers import FeedForward
    >>> ffn = FeedForward(hidden_units=[32], output_units=8)
    >>> tuple(ffn(np.ones((2, 5, 8), "float32")).shape)
    (2, 5, 8)
    >>> [tuple(w.shape) for w in ffn.weights]  # ReLU layer of 32, then the linear layer of 8
    [(8, 32), (32,), (32, 8), (8,)]
    """

    def __init__(self, hidden_units: Sequence[int], output_units: int, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(hidden_units, (list, tuple)):
            raise ValueError(f"hidden_units must be a list of widths (e.g. [4096]), got {hidden_units!r}.")
        self.hidden_units = [check_int("each of hidden_units", h, minimum=1) for h in hidden_units]
        self.output_units = check_int("output_units", output_units, minimum=1)
        self.dense = [keras.layers.Dense(h, activation="relu", name=f"dense_{i}")
                      for i, h in enumerate(self.hidden_units)]
        self.dense.append(keras.layers.Dense(output_units, name="output"))

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        shape = tuple(input_shape)
        for layer in self.dense:
            layer.build(shape)
            shape = shape[:-1] + (layer.units,)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        for layer in self.dense:
            x = layer(x)
        return x

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"hidden_units": self.hidden_units, "output_units": self.output_units})
        return config
