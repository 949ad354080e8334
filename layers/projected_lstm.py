"""The projected LSTM cell (LSTMP, Sak et al. 2014) of Shazeer et al.'s LSTM-2048-512 baseline and
MoE-143M (Appendix C): an LSTM whose output is projected to a narrower width, which is also the
recurrent input, so the recurrent matrix shrinks with it."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo.layers import int8
from zoo.layers.validation import check_int


@keras.saving.register_keras_serializable(package="zoo")
class ProjectedLSTMCell(keras.layers.Layer):
    """An LSTM cell whose output `h·P` (width `projection`) is both its output and its recurrent
    input. State: `[h·P, c]`. Wrap it in `keras.layers.RNN` for sequences.

    Gates in Keras' order (input, forget, candidate, output), the forget gate's bias starting at 1
    as Keras' LSTM does (`unit_forget_bias`).

    Args:
        units: width of the cell state `c`.
        projection: width of the output, the recurrent input.

    Example: a cell of 16 units projected to 4, over a sequence.

    >>> import keras, numpy as np
    >>> from zoo.layers import ProjectedLSTMCell
    >>> rnn = keras.layers.RNN(ProjectedLSTMCell(units=16, projection=4), return_sequences=True)
    >>> tuple(rnn(np.ones((2, 5, 8), "float32")).shape)
    (2, 5, 4)
    >>> [tuple(w.shape) for w in rnn.weights]  # kernel, recurrent kernel (from the width 4), bias, projection
    [(8, 64), (4, 64), (64,), (16, 4)]
    """

    def __init__(self, units: int, projection: int, **kwargs):
        super().__init__(**kwargs)
        self.units = check_int("units", units, minimum=1)
        self.projection = check_int("projection", projection, minimum=1)
        self.state_size = [projection, units]
        self.output_size = projection

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], 4 * self.units),
                                      initializer="glorot_uniform")
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(self.projection, 4 * self.units),
                                                initializer="orthogonal")
        bias = [0.0] * self.units + [1.0] * self.units + [0.0] * (2 * self.units)
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,),
                                    initializer=keras.initializers.Constant(bias))
        self.projection_kernel = self.add_weight(name="projection_kernel", shape=(self.units, self.projection),
                                                 initializer="glorot_uniform")

    def call(self, inputs: tf.Tensor, states: list[tf.Tensor], training: bool | None = None
             ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        h, c = states
        z = self._product(inputs, self.kernel) + self._product(h, self.recurrent_kernel) + self.bias
        i, f, g, o = ops.split(z, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = self._product(ops.sigmoid(o) * ops.tanh(c), self.projection_kernel)
        return h, [h, c]

    def _product(self, x, weight):
        kernel, scale = int8.kernel_and_scale(self, weight, self.compute_dtype)
        return int8.scaled(ops.matmul(x, kernel), scale)

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The three kernels as int8, each with a scale per output column (`zoo.layers.int8`)."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        self.kernel = int8.replace(self, self.kernel)
        self.recurrent_kernel = int8.replace(self, self.recurrent_kernel)
        self.projection_kernel = int8.replace(self, self.projection_kernel)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"units": self.units, "projection": self.projection})
        return config
