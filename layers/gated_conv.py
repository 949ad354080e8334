"""Causal gated 1-D convolution: equation (1) of Dauphin et al. (2016)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo.compat import sublayers
from zoo.layers import int8
from zoo.layers.validation import check_int

# activation name -> (is it gated, i.e. does it need the second convolution X*V + c?)
ACTIVATIONS = {
    "glu": True,  # (X*W + b) ⊗ σ(X*V + c), equation (1)
    "gtu": True,  # tanh(X*W + b) ⊗ σ(X*V + c), the LSTM-style gate of §3
    "bilinear": True,  # (X*W + b) ⊗ (X*V + c)
    "relu": False,
    "tanh": False,
    "linear": False,  # X*W + b
}


def check_kernel_size(kernel_size):
    return check_int("kernel_size", kernel_size, minimum=1)


@keras.saving.register_keras_serializable(package="layers")
class GatedConv1D(keras.layers.Layer):
    """A causal 1-D convolution followed by a (gated) activation.

    `h(X) = (X*W + b) ⊗ σ(X*V + c)` for the default `activation="glu"`. The input
    is left-padded with `kernel_size - 1` zeros, so the output at position t sees
    inputs t-k+1 … t and never the future (§2). `W` and `V` are stored as one
    kernel of `2 * filters` output channels so that both come from one convolution.

    With `weight_norm=True` (the paper's §4.2, after Salimans & Kingma 2016) the
    kernel is `g · v / ‖v‖`, the norm taken per output channel over (time, input);
    `v` starts from Kaiming (He) initialisation and `g` from `‖v‖`, so the layer
    starts exactly where an unnormalised Kaiming-initialised layer would.

    `step(x_t, state)` processes one position given the last `kernel_size - 1`
    inputs and returns the same value the full-sequence call gives at that
    position; `initial_state(batch_size)` is the all-zeros state that matches the
    left padding.

    Args:
        filters: output width.
        kernel_size: width of the convolution in time (>= 1).
        activation: one of "glu", "gtu", "bilinear", "relu", "tanh", "linear".
        weight_norm: reparameterise the kernel as `g · v / ‖v‖`.
        use_bias: add `b` (and `c`).
        kernel_initializer: initialiser of `v` (Kaiming normal by default).

    Call args:
        inputs: `<float32>[batch, time, input_dim]`.

    Returns:
        `<float32>[batch, time, filters]`: position t depends on inputs t-k+1 … t only.

    Example:

    >>> import keras
    >>> from zoo.layers import GatedConv1D
    >>> layer = GatedConv1D(filters=4, kernel_size=3)
    >>> x = keras.random.normal((2, 5, 8), seed=0)
    >>> y = layer(x)
    >>> tuple(y.shape)
    (2, 5, 4)
    >>> changed = keras.ops.concatenate([x[:, :3], keras.random.normal((2, 2, 8), seed=1)], axis=1)
    >>> bool(keras.ops.all(layer(changed)[:, :3] == y[:, :3]))  # the future does not leak back
    True
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        activation: str = "glu",
        weight_norm: bool = True,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "he_normal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_kernel_size(kernel_size)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown activation {activation!r}; expected one of {sorted(ACTIVATIONS)}."
            )
        check_int("filters", filters, minimum=1)
        self.filters = filters
        self.kernel_size = kernel_size
        self.activation = activation
        self.weight_norm = weight_norm
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.gated = ACTIVATIONS[activation]

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        input_dim = input_shape[-1]
        channels = 2 * self.filters if self.gated else self.filters
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.kernel_size, input_dim, channels),
            initializer=self.kernel_initializer,
        )
        if self.weight_norm:
            self.g = self.add_weight(name="g", shape=(channels,), initializer="ones")
            self.g.assign(ops.sqrt(ops.sum(ops.square(self.kernel), axis=(0, 1))))
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(channels,), initializer="zeros")

    def effective_kernel(self) -> tf.Tensor:
        """The kernel actually applied: `g · v / ‖v‖` under weight normalisation."""
        once = getattr(self, "_effective_once", None)
        if once is not None:  # computed before a decoding loop (`kernel_computed_once`)
            return once
        folded = getattr(self, "_folded_kernel", None)
        if folded is not None:  # an export's variable (`weight_norm_folded`)
            return ops.convert_to_tensor(folded)
        if int8.is_quantized(self):
            return int8.read(self, self.kernel)
        kernel = ops.convert_to_tensor(self.kernel)
        if not self.weight_norm:
            return kernel
        norm = ops.sqrt(ops.sum(ops.square(kernel), axis=(0, 1)) + 1e-12)
        return kernel * (ops.convert_to_tensor(self.g) / norm)

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The effective kernel (`g · v / ‖v‖` folded in) as int8 with a scale per output channel;
        `g` is dropped. See `zoo.layers.int8`."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        effective = self.effective_kernel()
        if self.weight_norm:
            int8.untrack(self, self.g)
        self.kernel = int8.replace(self, self.kernel, effective)

    def _gate(self, a, gate):
        """A gated activation of the values `a` and the gates `gate`."""
        if self.activation == "glu":
            return a * ops.sigmoid(gate)
        if self.activation == "gtu":
            return ops.tanh(a) * ops.sigmoid(gate)
        return a * gate  # bilinear

    def _activate(self, z):
        if self.gated:
            return self._gate(*ops.split(z, 2, axis=-1))
        if self.activation == "relu":
            return ops.relu(z)
        if self.activation == "tanh":
            return ops.tanh(z)
        return z

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        scale = None
        if int8.is_quantized(self):
            kernel, scale = int8.kernel_and_scale(self, self.kernel, self.compute_dtype)
        else:
            kernel = ops.cast(self.effective_kernel(), self.compute_dtype)
        k = self.kernel_size
        if k == 1:
            z = ops.matmul(inputs, kernel[0])
        else:
            # Causal: k-1 zeros on the left, none on the right (§2).
            padded = ops.pad(inputs, [[0, 0], [k - 1, 0], [0, 0]])
            z = ops.conv(padded, kernel, strides=1, padding="valid")
        z = int8.scaled(z, scale)  # int8: each output channel's scale, after the product
        if self.use_bias:
            z = z + ops.cast(self.bias, self.compute_dtype)
        return self._activate(z)

    # ---- one token at a time -------------------------------------------------
    def initial_state(self, batch_size: int | tf.Tensor, input_dim: int | None = None) -> tf.Tensor:
        """The state before the first token: `kernel_size - 1` zero inputs."""
        input_dim = input_dim or self.kernel.shape[1]
        return ops.zeros((batch_size, self.kernel_size - 1, input_dim), self.compute_dtype)

    def prefill_state(self, inputs: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
        """The state `step` holds after row b's first `lengths[b]` positions of `inputs`
        ([batch, time, input_dim], right-padded): the inputs at positions `lengths[b] - k + 1 …
        lengths[b] - 1`, zeros before the start. Reading a prompt with `call` and this gives what
        feeding it to `step` token by token gives."""
        k = self.kernel_size
        padded = tf.pad(inputs, [[0, 0], [k - 1, 0], [0, 0]])  # the zeros `initial_state` holds
        positions = tf.cast(lengths, tf.int32)[:, None] + tf.range(k - 1)[None, :]
        return tf.gather(padded, positions, batch_dims=1)

    @contextlib.contextmanager
    def kernel_computed_once(self, split_products: bool = True) -> Iterator[None]:
        """While tracing a decoding loop: `g · v / ‖v‖` computed here, once, for the prompt's
        parallel pass and for `step`, whose matrices are cut here too, outside the loop, instead of
        at every token. `split_products=False`: a gated layer's step is one product, then a split
        (for a runtime that runs its ops one after another, as LiteRT does: see `_step_products`)."""
        object.__setattr__(self, "_effective_once", self.effective_kernel())  # the prompt's pass uses it too
        object.__setattr__(self, "_step_matrices", self._step_products(split_products))
        try:
            yield
        finally:
            object.__setattr__(self, "_step_matrices", None)
            object.__setattr__(self, "_effective_once", None)

    def _step_products(self, split: bool = True):
        """`step`'s matrices: the effective kernel as [kernel_size · input_dim, channels], with its
        bias; for a gated layer cut in two (the values and the gates) unless `split` is False, so
        that each token's two products are independent ops that TensorFlow's executor runs side by
        side and no split follows. A runtime that runs one op at a time (LiteRT) is faster with one
        product and a split: half the products to dispatch a token."""
        kernel = ops.cast(self.effective_kernel(), self.compute_dtype)
        kernel = ops.reshape(kernel, (-1, kernel.shape[-1]))
        bias = ops.cast(self.bias, self.compute_dtype) if self.use_bias else None
        if not self.gated or not split:
            return [(kernel, bias)]
        f = self.filters
        return [(kernel[:, :f], None if bias is None else bias[:f]), (kernel[:, f:], None if bias is None else bias[f:])]

    def step(self, x_t: tf.Tensor, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`x_t`: [batch, input_dim]; `state`: [batch, kernel_size - 1, input_dim].

        Returns `(y_t, new_state)` with `y_t` equal to `call` at this position.
        """
        matrices = getattr(self, "_step_matrices", None) or self._step_products()
        window = ops.concatenate([state, x_t[:, None, :]], axis=1)  # [b, k, in]
        flat = ops.reshape(window, (-1, matrices[0][0].shape[0]))
        # matrix products over the flattened window, not an einsum over (k, in): faster per token
        # on a CPU (results/benchmarks/served-generate.md)
        z = [ops.matmul(flat, kernel) if bias is None else ops.matmul(flat, kernel) + bias for kernel, bias in matrices]
        if self.gated and len(z) == 1:  # one product of the values and the gates (`split_products=False`)
            z = ops.split(z[0], 2, axis=-1)
        return (self._gate(*z) if self.gated else self._activate(z[0])), window[:, 1:, :]

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "activation": self.activation,
                "weight_norm": self.weight_norm,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@contextlib.contextmanager
def weight_norm_folded(model):
    """While an export of `model` is traced: each weight-normalised `GatedConv1D` in it reads its
    effective kernel `g · v / ‖v‖` from a new variable that holds the value it has now, instead of
    computing it from `v` and `g` at every request (an int8 layer folded it when quantized).
    Yields `(replaced, folded)`: the Keras variables `v` and `g` the traced functions no longer
    read, and the new `tf.Variable`s, which the export saves in their place."""
    layers = [layer for layer in sublayers(model)
              if isinstance(layer, GatedConv1D) and layer.weight_norm and not int8.is_quantized(layer)]
    replaced, folded = [], []
    try:
        for layer in layers:
            variable = tf.Variable(layer.effective_kernel(), trainable=False, name=f"{layer.name}_folded_kernel")
            object.__setattr__(layer, "_folded_kernel", variable)
            replaced += [layer.kernel, layer.g]
            folded.append(variable)
        yield replaced, folded
    finally:
        for layer in layers:
            object.__setattr__(layer, "_folded_kernel", None)
