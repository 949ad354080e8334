"""Pre-activation residual blocks of gated convolutions (§2 and Table 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo.layers.gated_conv import GatedConv1D, check_kernel_size
from zoo.layers.validation import check_int

MAX_LAYERS_PER_BLOCK = 5  # "each block has up to 5 layers" (§2)


def check_block_spec(spec):
    """`spec` is a list of `[kernel_size, width]` pairs, one per conv layer."""
    if not isinstance(spec, (list, tuple)) or not 1 <= len(spec) <= MAX_LAYERS_PER_BLOCK:
        raise ValueError(
            f"A residual block is a list of 1 to {MAX_LAYERS_PER_BLOCK} [kernel_size, width] "
            f"pairs, got {spec!r}."
        )
    for pair in spec:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"Each layer of a block is a [kernel_size, width] pair, got {pair!r}.")
        check_kernel_size(pair[0])
        check_int("A layer width", pair[1], minimum=1)
    return [[int(k), int(w)] for k, w in spec]


@keras.saving.register_keras_serializable(package="layers")
class ResidualBlock(keras.layers.Layer):
    """`y = skip(x) + h_L(dropout(… h_1(dropout(x))))`, each `h` a `GatedConv1D` (dropout, when
    set, before every conv of the branch).

    Pre-activation in the sense of He et al. (2016): the nonlinearity lives inside
    the residual branch (the gate of each `GatedConv1D`) and nothing is applied
    after the addition, so the identity path from block to block is clean.
    `skip` is the identity when input and output widths agree, otherwise a
    width-1 linear projection (weight-normalised when the block is).

    A bottleneck block (Table 1, "k=1 down, k>1, k=1 up") is the spec
    `[[1, narrow], [k, narrow], [1, wide]]`; see `bottleneck_spec`.

    Decoding one token at a time: `initial_state(batch, input_dim)` and `step(x_t, state)`
    with `state` the list of each conv's last `kernel_size - 1` inputs.

    Two options express fairseq's convolutional language models (`fconv_lm`) exactly:
    `residual=False` drops the skip path (`y = h_L(… h_1(x))`, fairseq's residual 0), and
    `residual_scale` multiplies the sum (`y = (skip(x) + h(x)) · scale`; fairseq uses √0.5 to keep
    the variance of the sum that of its terms).

    Example: Table 1's bottleneck block from width 8, kernel 3 on a narrow width of 4.

    >>> import numpy as np
    >>> from zoo.layers import ResidualBlock, bottleneck_spec
    >>> block = ResidualBlock(bottleneck_spec(3, narrow=4, wide=8))
    >>> x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    >>> y = block(x)
    >>> tuple(y.shape)
    (2, 5, 8)
    >>> state = block.initial_state(2, 8)  # one token at a time gives what `call` gives
    >>> for t in range(5):
    ...     y_t, state = block.step(x[:, t], state)
    >>> bool(np.allclose(y_t, y[:, -1], atol=1e-5))
    True
    """

    def __init__(self, layers: Sequence[Sequence[int]], activation: str = "glu", weight_norm: bool = True,
                 dropout: float = 0.0, residual: bool = True, residual_scale: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.layer_specs = check_block_spec(layers)
        self.activation = activation
        self.weight_norm = weight_norm
        self.dropout = dropout
        if not isinstance(residual, bool):
            raise ValueError(f"residual must be True or False, got {residual!r}.")
        if isinstance(residual_scale, bool) or not isinstance(residual_scale, (int, float)) or residual_scale <= 0:
            raise ValueError(f"residual_scale must be a positive number, got {residual_scale!r}.")
        self.residual = residual
        self.residual_scale = float(residual_scale)
        self.convs = [
            GatedConv1D(w, k, activation=activation, weight_norm=weight_norm, name=f"conv_{i}")
            for i, (k, w) in enumerate(self.layer_specs)
        ]
        self.dropout_layer = keras.layers.Dropout(dropout) if dropout else None
        self.projection = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        dim = input_shape[-1]
        shape = tuple(input_shape)
        for conv in self.convs:
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
        out_dim = self.layer_specs[-1][1]
        if out_dim != dim and self.residual:
            self.projection = GatedConv1D(
                out_dim, 1, activation="linear", weight_norm=self.weight_norm, name="projection"
            )
            self.projection.build(tuple(input_shape))

    def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        x = inputs
        for conv in self.convs:
            if self.dropout_layer is not None:
                x = self.dropout_layer(x, training=training)
            x = conv(x)
        if not self.residual:
            return x
        skip = inputs if self.projection is None else self.projection(inputs)
        return self._scaled(skip + x)

    def _scaled(self, total):
        return total if self.residual_scale == 1.0 else total * self.residual_scale

    def initial_state(self, batch_size: int | tf.Tensor, input_dim: int) -> list[tf.Tensor]:
        """The state before the first token: each conv's `kernel_size - 1` zero inputs."""
        states, dim = [], input_dim
        for conv in self.convs:
            states.append(conv.initial_state(batch_size, dim))
            dim = conv.filters
        return states

    def prefill(self, inputs: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """`call` on a right-padded sequence ([batch, time, input_dim], row b valid up to
        `lengths[b]`), and the decoding state after each row's valid positions: `(outputs,
        state)`, the state being what `step` would hold after feeding those positions one by one."""
        x, state = inputs, []
        for conv in self.convs:
            state.append(conv.prefill_state(x, lengths))
            x = conv(x)
        if not self.residual:
            return x, state
        skip = inputs if self.projection is None else self.projection(inputs)
        return self._scaled(skip + x), state

    def step(self, x_t: tf.Tensor, state: list[tf.Tensor]) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """`x_t`: [batch, input_dim] and the state `initial_state` or `step` gave: `(y_t,
        new_state)`, `y_t` equal to `call` at this position."""
        x, new_state = x_t, []
        for conv, s in zip(self.convs, state):
            x, s = conv.step(x, s)
            new_state.append(s)
        if not self.residual:
            return x, new_state
        skip = x_t
        if self.projection is not None:  # a width-1 conv: no state
            skip, _ = self.projection.step(x_t, self.projection.initial_state(ops.shape(x_t)[0], x_t.shape[-1]))
        return self._scaled(skip + x), new_state

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.layer_specs[-1][1],)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "layers": self.layer_specs,
                "activation": self.activation,
                "weight_norm": self.weight_norm,
                "dropout": self.dropout,
            }
        )
        # only when set, so that the configs of blocks without them stay as they were
        if not self.residual:
            config["residual"] = False
        if self.residual_scale != 1.0:
            config["residual_scale"] = self.residual_scale
        return config


def bottleneck_spec(kernel_size: int, narrow: int, wide: int) -> list[list[int]]:
    """Table 1's bottleneck block: k=1 down to `narrow`, k>1 at `narrow`, k=1 up to `wide`.

    Returns:
        The block's `[kernel_size, width]` pairs, one per conv, for `ResidualBlock(layers=...)`.

    Example: the first block of GCNN-14B (Table 1: [1, 128], [5, 128], [1, 512]).

    >>> from zoo.layers import bottleneck_spec
    >>> bottleneck_spec(5, narrow=128, wide=512)
    [[1, 128], [5, 128], [1, 512]]
    """
    return [[1, narrow], [kernel_size, narrow], [1, wide]]
