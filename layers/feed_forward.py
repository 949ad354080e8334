"""A dense feed-forward network: the one always-used "expert" of Shazeer et al.'s MoE-1-Wide and
MoE-1-Deep baselines (Appendix C.1), which stand in for a mixture at the same computation."""

import keras

from zoo.layers.validation import check_int


@keras.saving.register_keras_serializable(package="zoo")
class FeedForward(keras.layers.Layer):
    """ReLU layers of `hidden_units`, then a linear layer of `output_units`; any input rank.

    Args:
        hidden_units: the widths of the ReLU layers, bottom first (may be empty).
        output_units: the width of the linear output layer.
    """

    def __init__(self, hidden_units, output_units, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(hidden_units, (list, tuple)):
            raise ValueError(f"hidden_units must be a list of widths (e.g. [4096]), got {hidden_units!r}.")
        self.hidden_units = [check_int("each of hidden_units", h, minimum=1) for h in hidden_units]
        self.output_units = check_int("output_units", output_units, minimum=1)
        self.dense = [keras.layers.Dense(h, activation="relu", name=f"dense_{i}")
                      for i, h in enumerate(self.hidden_units)]
        self.dense.append(keras.layers.Dense(output_units, name="output"))

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.dense:
            layer.build(shape)
            shape = shape[:-1] + (layer.units,)

    def call(self, x):
        for layer in self.dense:
            x = layer(x)
        return x

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": self.hidden_units, "output_units": self.output_units})
        return config
