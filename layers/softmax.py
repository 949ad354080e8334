"""The full softmax output layer, with the interface every output layer of the zoo shares.

An output layer maps hidden states `[..., d]` to next-token distributions and offers:
`log_prob(hidden)` (the whole normalised log-distribution), `loss(hidden, targets)` (per-token
negative log-likelihood), `target_log_prob(hidden, targets)` and `predict(hidden)` (the most
likely id). Log-softmax is computed in float32 whatever the compute dtype (float16, bfloat16 or
float32), in float64 under a float64 one (`softmax_dtype`).

Every one of these methods builds the layer from the last axis of `hidden` when it is called before
the layer itself (`build_on_first_use`), so a freshly constructed output layer works as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo.layers import int8
from zoo.layers.validation import check_int


def softmax_dtype(layer):
    """float32 for float16/bfloat16/float32 compute (mixed precision), float64 for float64."""
    return "float64" if layer.compute_dtype == "float64" else "float32"


def build_on_first_use(layer, hidden):
    """Builds `layer` from the last axis of `hidden` if nothing has built it yet (a method such as
    `loss` called before the layer itself); once built, does nothing. Keras wraps `build`, so this
    call marks the layer built and a later call of the layer does not build it again."""
    if layer.built:
        return
    shape = getattr(hidden, "shape", None)
    if shape is None:
        shape = ops.convert_to_tensor(hidden).shape
    shape = tuple(shape)
    if not shape or shape[-1] is None:
        raise ValueError(
            f"{type(layer).__name__} builds itself from the last axis of the hidden states, which "
            f"must be known; got shape {shape}."
        )
    layer.build(shape)


@keras.saving.register_keras_serializable(package="layers")
class FullSoftmax(keras.layers.Layer):
    """A dense projection to `vocabulary_size` logits followed by a log-softmax.

    Args:
        vocabulary_size: the number of ids (at least 2).

    Example:

    >>> import numpy as np
    >>> from zoo.layers import FullSoftmax
    >>> head = FullSoftmax(vocabulary_size=50)
    >>> hidden = np.ones((2, 5, 8), "float32")
    >>> log_probs = head.log_prob(hidden)  # builds the layer from the last axis: a [8, 50] kernel
    >>> tuple(log_probs.shape), tuple(head.kernel.shape)
    ((2, 5, 50), (8, 50))
    >>> bool(np.allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5))
    True
    >>> tuple(head.loss(hidden, np.zeros((2, 5), "int32")).shape)  # one negative log-likelihood per token
    (2, 5)
    """

    def __init__(self, vocabulary_size: int, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = check_int("vocabulary_size", vocabulary_size, minimum=2)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_shape[-1], self.vocabulary_size),
            initializer="glorot_uniform",
        )
        self.bias = self.add_weight(name="bias", shape=(self.vocabulary_size,), initializer="zeros")

    def logits(self, hidden: tf.Tensor) -> tf.Tensor:
        """`<float32>[..., vocabulary_size]`: the unnormalised scores of every id."""
        build_on_first_use(self, hidden)
        blocks = getattr(self, "_blocks_once", None)
        if blocks is not None:
            logits = ops.concatenate([int8.scaled(ops.matmul(hidden, k), s) + b for k, s, b in blocks], axis=-1)
        else:
            kernel, scale = self._matrix()
            logits = int8.scaled(ops.matmul(hidden, kernel), scale) + ops.cast(self.bias, self.compute_dtype)
        return ops.cast(logits, softmax_dtype(self))

    def _matrix(self):
        """`(kernel [d, vocabulary], scale or None)` of the product (`int8.kernel_and_scale`)."""
        return int8.kernel_and_scale(self, self.kernel, self.compute_dtype)

    def _hidden_size(self):
        return self.kernel.shape[0]

    def blocks_to_fit(self, cache_bytes: int) -> int:
        """The fewest blocks of consecutive ids (`blocks_computed_once`) whose part of the
        projection, in the compute dtype, each takes at most `cache_bytes`."""
        itemsize = {"float16": 2, "bfloat16": 2, "float64": 8}.get(self.compute_dtype, 4)
        ids = max(1, int(cache_bytes) // (self._hidden_size() * itemsize))
        return -(-self.vocabulary_size // ids)

    @contextlib.contextmanager
    def blocks_computed_once(self, blocks: int) -> Iterator[None]:
        """While a decoding loop is traced: the projection (with any int8 scales) and the bias cut
        once, outside the loop, into `blocks` blocks of consecutive ids. Each token's product is
        then `blocks` independent products that the executor runs side by side on the cores, each
        over a slice of the matrix that fits a core's cache (`zoo.models.generation.head_blocks`);
        the logits are the same."""
        kernel, scale = self._matrix()
        bias = ops.cast(self.bias, self.compute_dtype)
        blocks = max(1, min(blocks, self.vocabulary_size))
        cuts = [self.vocabulary_size * i // blocks for i in range(blocks + 1)]
        parts = [(kernel[:, a:b], None if scale is None else scale[a:b], bias[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        object.__setattr__(self, "_blocks_once", parts)
        try:
            yield
        finally:
            object.__setattr__(self, "_blocks_once", None)

    def call(self, hidden: tf.Tensor) -> tf.Tensor:
        return self.log_prob(hidden)

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The kernel as int8 with a scale per output id (`zoo.layers.int8`); the bias stays."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        self.kernel = int8.replace(self, self.kernel)

    def log_prob(self, hidden: tf.Tensor) -> tf.Tensor:
        """`<float32>[..., vocabulary_size]`: the log-distribution over every id."""
        return ops.log_softmax(self.logits(hidden), axis=-1)

    def loss(self, hidden: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """Per-token negative log-likelihood, shaped like `targets`."""
        return ops.sparse_categorical_crossentropy(targets, self.logits(hidden), from_logits=True)

    def target_log_prob(self, hidden: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """The log-probability of each target, shaped like `targets`."""
        return -self.loss(hidden, targets)

    def predict(self, hidden: tf.Tensor) -> tf.Tensor:
        """The most likely id, shaped like `hidden` without its last axis."""
        return ops.argmax(self.logits(hidden), axis=-1)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.vocabulary_size,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["vocabulary_size"] = self.vocabulary_size
        return config


@keras.saving.register_keras_serializable(package="layers")
class TiedSoftmax(FullSoftmax):
    """A full softmax whose projection is the transpose of the model's input embedding (tied
    input and output embeddings, Press & Wolf 2017; Inan et al. 2017): it owns only its bias.

    `embeddings` is a function returning the `[vocabulary_size, d]` embedding matrix; the model
    that owns the embedding passes it, so the matrix is one variable, trained by both its uses.

    Example:

    >>> import keras, numpy as np
    >>> from zoo.layers import TiedSoftmax
    >>> embedding = keras.layers.Embedding(50, 8)
    >>> embedding.build((None,))
    >>> head = TiedSoftmax(vocabulary_size=50, embeddings=lambda: embedding.embeddings)
    >>> tuple(head.log_prob(np.ones((2, 5, 8), "float32")).shape)
    (2, 5, 50)
    >>> [tuple(w.shape) for w in head.weights]  # only its bias: the projection is the embedding's
    [(50,)]
    """

    def __init__(self, vocabulary_size: int, embeddings: Callable[[], tf.Tensor] | None = None, **kwargs):
        super().__init__(vocabulary_size, **kwargs)
        if embeddings is None or not callable(embeddings):
            raise ValueError("TiedSoftmax needs `embeddings`, a function returning the input embedding matrix "
                             f"[vocabulary_size, d]; got {embeddings!r}.")
        self._embeddings = embeddings

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self._width = input_shape[-1]  # the embedding's width, read without reading the embedding
        self.bias = self.add_weight(name="bias", shape=(self.vocabulary_size,), initializer="zeros")

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """Nothing of its own: the embedding it is tied to holds the int8 matrix."""
        int8.check_mode(mode)

    def _matrix(self):
        return ops.transpose(ops.cast(self._embeddings(), self.compute_dtype)), None

    def _hidden_size(self):
        return self._width
