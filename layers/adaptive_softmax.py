"""The adaptive softmax of Grave et al. (2016), the output layer of the GCNN paper's models.

Ids must be sorted by decreasing frequency (every vocabulary builder of the zoo does so): the
`cutoffs[0]` most frequent words live in the head, and each tail cluster `i` holds ids
`[cutoffs[i], cutoffs[i+1])` (the last one up to `vocabulary_size`).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo.layers import int8
from zoo.layers.softmax import build_on_first_use, softmax_dtype
from zoo.layers.validation import check_int, is_int


def check_cutoffs(cutoffs, vocabulary_size):
    check_int("vocabulary_size", vocabulary_size, minimum=2)
    if not isinstance(cutoffs, (list, tuple)) or not cutoffs:
        raise ValueError(f"cutoffs must be a non-empty list of increasing ids, got {cutoffs!r}.")
    cutoffs = list(cutoffs)
    if not all(is_int(c) for c in cutoffs):
        raise ValueError(f"cutoffs must be integers, got {cutoffs!r}.")
    if len(set(cutoffs)) != len(cutoffs):
        raise ValueError(f"cutoffs must not repeat a value, got {cutoffs!r}.")
    if cutoffs != sorted(cutoffs):
        raise ValueError(f"cutoffs must be sorted in increasing order, got {cutoffs!r}.")
    if cutoffs[0] < 1 or cutoffs[-1] >= vocabulary_size:
        raise ValueError(
            f"cutoffs must lie in [1, vocabulary_size - 1] = [1, {vocabulary_size - 1}], got {cutoffs!r}."
        )
    return cutoffs


@keras.saving.register_keras_serializable(package="layers")
class AdaptiveSoftmax(keras.layers.Layer):
    """Head over the `cutoffs[0]` most frequent ids plus one logit per tail cluster; tail
    cluster i is reached through a projection of width `d // factor**(i+1)` and its own
    output matrix. `p(w) = p_head(cluster of w) · p_cluster(w)` for a tail word.

    Training (`loss`) computes the exact negative log-likelihood of every target while
    touching only the head and, for each cluster, only the rows whose target falls in it:
    no `[tokens, vocabulary]` tensor is built. Log-softmaxes are computed in float32 (float64
    under a float64 compute dtype).

    Methods: `log_prob(hidden)` (the full `[..., vocabulary]` log-distribution),
    `loss(hidden, targets)`, `target_log_prob(hidden, targets)`, `predict(hidden)`. Each builds
    the layer from the last axis of `hidden` when called before the layer itself.

    The cutoffs assume ids sorted by decreasing frequency, as every vocabulary builder of the
    zoo makes them (`zoo.data.WordTokenizer.build`): the head then holds the frequent words, and
    most tokens never pay for a tail cluster.

    Args:
        vocabulary_size: number of ids, sorted by decreasing frequency.
        cutoffs: increasing ids where clusters start, all in `[1, vocabulary_size - 1]`.
        factor: width divisor of each successive tail projection (Grave et al.'s 4).
        use_bias: the head's bias (fairseq's adaptive softmax has none).
        fairseq_2018: the layout and indexing of fairseq's adaptive softmax before its
            `version` buffer (July 2018; its released fconv_lm checkpoints): tail i projects to
            `d // factor**i` (the first tail keeps the full width), and cluster i's prior is head
            column `cutoffs[0] + i - 1`, one lower than today's, in training targets and in
            log-probabilities alike. Cluster 0's prior is then the last head word's column, and
            the head's last column is no cluster's: the distribution does not sum to one, and the
            released models were trained that way.
        tail_widths: the width of each tail cluster's projection, one per cutoff, instead of
            `d // factor**(i+1)` (a model whose tokenizer was extended gets a last cluster of
            the added ids as wide as the hidden state: `zoo.models.extend`).

    Shapes: `hidden` is `<float32>[batch, time, dim]`, `targets` `<int32>[batch, time]`;
    `log_prob` returns `<float32>[batch, time, vocabulary_size]`, `loss` and `target_log_prob`
    `<float32>[batch, time]`, `predict` `<int32>[batch, time]`.

    Example:

    >>> import keras, numpy as np
    >>> from zoo.layers import AdaptiveSoftmax
    >>> head = AdaptiveSoftmax(vocabulary_size=50, cutoffs=[10, 30])
    >>> hidden = keras.random.normal((2, 5, 16), seed=0)
    >>> log_probs = head.log_prob(hidden)
    >>> tuple(log_probs.shape)
    (2, 5, 50)
    >>> bool(np.allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5))  # a distribution over all 50 ids
    True
    >>> targets = np.array([[0, 9, 10, 29, 49]] * 2)
    >>> bool(np.allclose(head.target_log_prob(hidden, targets),
    ...                  np.take_along_axis(np.asarray(log_probs), targets[..., None], -1)[..., 0], atol=1e-5))
    True
    """

    def __init__(self, vocabulary_size: int, cutoffs: list[int], factor: float = 4, use_bias: bool = True,
                 fairseq_2018: bool = False, tail_widths: list[int] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.cutoffs = check_cutoffs(cutoffs, vocabulary_size)
        if tail_widths is not None:
            if (not isinstance(tail_widths, (list, tuple)) or len(tail_widths) != len(self.cutoffs)
                    or not all(is_int(w) and w >= 1 for w in tail_widths)):
                raise ValueError(f"tail_widths must be None or one width >= 1 per cutoff ({len(self.cutoffs)}), "
                                 f"got {tail_widths!r}.")
            if fairseq_2018:
                raise ValueError("tail_widths is not an option of fairseq's 2018 layout (fairseq_2018=True).")
            tail_widths = [int(w) for w in tail_widths]
        self.tail_widths = tail_widths
        if not isinstance(factor, (int, float)) or factor < 1:
            raise ValueError(f"factor must be a number >= 1, got {factor!r}.")
        for name, value in (("use_bias", use_bias), ("fairseq_2018", fairseq_2018)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}.")
        self.vocabulary_size = vocabulary_size
        self.factor = factor
        self.use_bias = use_bias
        self.fairseq_2018 = fairseq_2018
        self.bounds = self.cutoffs + [vocabulary_size]  # cluster i: [bounds[i], bounds[i+1])
        # cluster i's prior is head column prior_start + i; fairseq's 2018 code read one lower
        self.prior_start = self.cutoffs[0] - (1 if fairseq_2018 else 0)

    @property
    def head_size(self) -> int:
        """The head's width: the `cutoffs[0]` head words and one prior per tail cluster."""
        return self.cutoffs[0] + len(self.cutoffs)

    def tail_width(self, dim: int, i: int) -> int:
        """The width tail cluster i is projected to from hidden width `dim`."""
        if self.tail_widths is not None:
            return self.tail_widths[i]
        return dim // int(self.factor ** (i if self.fairseq_2018 else i + 1))

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        dim = input_shape[-1]
        smallest = min(self.tail_width(dim, i) for i in range(len(self.cutoffs)))
        if smallest < 1:
            power = len(self.cutoffs) - (1 if self.fairseq_2018 else 0)
            raise ValueError(
                f"The hidden width {dim} is too small for {len(self.cutoffs)} tail clusters at "
                f"factor {self.factor}: it must be at least "
                f"factor**{'(len(cutoffs) - 1)' if self.fairseq_2018 else 'len(cutoffs)'} = "
                f"{int(self.factor ** power)}."
            )
        self.head_kernel = self.add_weight(name="head_kernel", shape=(dim, self.head_size),
                                           initializer="glorot_uniform")
        if self.use_bias:
            self.head_bias = self.add_weight(name="head_bias", shape=(self.head_size,), initializer="zeros")
        self.tail_projections, self.tail_kernels = [], []
        for i in range(len(self.cutoffs)):
            width = self.tail_width(dim, i)
            size = self.bounds[i + 1] - self.bounds[i]
            self.tail_projections.append(
                self.add_weight(name=f"tail_{i}_projection", shape=(dim, width), initializer="glorot_uniform")
            )
            self.tail_kernels.append(
                self.add_weight(name=f"tail_{i}_kernel", shape=(width, size), initializer="glorot_uniform")
            )

    # ---- pieces ----------------------------------------------------------------------
    def _matmul(self, x, weight):
        kernel, scale = int8.kernel_and_scale(self, weight, self.compute_dtype)
        return int8.scaled(ops.matmul(x, kernel), scale)

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The head kernel and every tail's projection and kernel as int8, each with a scale per
        output column (`zoo.layers.int8`); the head's bias stays float32."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        self.head_kernel = int8.replace(self, self.head_kernel)
        for weights in (self.tail_projections, self.tail_kernels):
            for i, weight in enumerate(list(weights)):
                weights[i] = int8.replace(self, weight)

    def _head_logits(self, hidden):
        logits = self._matmul(hidden, self.head_kernel)
        if self.use_bias:
            logits = logits + ops.cast(self.head_bias, self.compute_dtype)
        return ops.cast(logits, softmax_dtype(self))

    def _tail_logits(self, hidden, i):
        return ops.cast(self._matmul(self._matmul(hidden, self.tail_projections[i]), self.tail_kernels[i]), softmax_dtype(self))

    def check_targets(self, targets: tf.Tensor) -> tf.Tensor:
        """Out-of-range ids would be silently wrong on a GPU (a gather returns zeros there)."""
        if tf.executing_eagerly():
            t = ops.convert_to_numpy(targets)
            bad = t[(t < 0) | (t >= self.vocabulary_size)]
            if bad.size:
                raise ValueError(
                    f"Target id {int(bad.flat[0])} is outside the vocabulary: ids must be in "
                    f"[0, {self.vocabulary_size - 1}]."
                )
            return targets
        with tf.control_dependencies([
            tf.debugging.assert_less(targets, tf.cast(self.vocabulary_size, targets.dtype),
                                     message="AdaptiveSoftmax: a target id is >= vocabulary_size"),
            tf.debugging.assert_non_negative(targets, message="AdaptiveSoftmax: a target id is negative"),
        ]):
            return tf.identity(targets)

    # ---- the interface of every output layer ----------------------------------------------
    def call(self, hidden: tf.Tensor) -> tf.Tensor:
        return self.log_prob(hidden)

    def log_prob(self, hidden: tf.Tensor) -> tf.Tensor:
        """`<float32>[..., vocabulary_size]`: the log-distribution over every id."""
        build_on_first_use(self, hidden)
        head = ops.log_softmax(self._head_logits(hidden), axis=-1)
        parts = [head[..., : self.cutoffs[0]]]
        for i in range(len(self.cutoffs)):
            cluster = head[..., self.prior_start + i : self.prior_start + i + 1]
            parts.append(cluster + ops.log_softmax(self._tail_logits(hidden, i), axis=-1))
        return ops.concatenate(parts, axis=-1)

    def loss(self, hidden: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """Per-token negative log-likelihood, shaped like `targets`."""
        build_on_first_use(self, hidden)
        targets = ops.cast(self.check_targets(targets), "int32")
        shape = ops.shape(targets)
        flat_h = ops.reshape(hidden, (-1, ops.shape(hidden)[-1]))
        flat_t = ops.reshape(targets, (-1,))
        # Head target: the word itself if in the head, else its cluster's logit.
        cluster_of = ops.sum(
            ops.stack([ops.cast(flat_t >= c, "int32") for c in self.cutoffs], axis=0), axis=0
        )  # 0 for head words, i+1 for cluster i
        head_target = ops.where(cluster_of == 0, flat_t, self.prior_start + cluster_of - 1)
        nll = ops.sparse_categorical_crossentropy(head_target, self._head_logits(flat_h), from_logits=True)
        n = ops.shape(flat_t)[0]
        for i in range(len(self.cutoffs)):
            rows = tf.where(cluster_of == i + 1)[:, 0]  # only the tokens of this cluster
            h_i = tf.gather(flat_h, rows)
            t_i = tf.gather(flat_t, rows) - self.bounds[i]
            tail_nll = ops.sparse_categorical_crossentropy(t_i, self._tail_logits(h_i, i), from_logits=True)
            nll = nll + tf.scatter_nd(rows[:, None], tail_nll, tf.cast([n], rows.dtype))
        return ops.reshape(nll, shape)

    def target_log_prob(self, hidden: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """`<float32>[...]`, shaped like `targets`: the log-probability of each target."""
        return -self.loss(hidden, targets)

    def predict(self, hidden: tf.Tensor) -> tf.Tensor:
        """The most likely id. A row whose best head word beats every cluster's total mass
        is decided by the head alone (no tail word can be likelier than its cluster); only
        the other rows pay for the tail clusters."""
        build_on_first_use(self, hidden)
        shape = ops.shape(hidden)[:-1]
        flat_h = ops.reshape(hidden, (-1, ops.shape(hidden)[-1]))
        head = ops.log_softmax(self._head_logits(flat_h), axis=-1)
        c0 = self.cutoffs[0]
        best_word = ops.argmax(head[:, :c0], axis=-1)
        priors = head[:, self.prior_start : self.prior_start + len(self.cutoffs)]
        decided = ops.max(head[:, :c0], axis=-1) >= ops.max(priors, axis=-1)
        rows = tf.where(ops.logical_not(decided))[:, 0]
        undecided = ops.argmax(self.log_prob(tf.gather(flat_h, rows)), axis=-1)
        out = tf.tensor_scatter_nd_update(best_word, rows[:, None], undecided)
        return ops.reshape(out, shape)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.vocabulary_size,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"vocabulary_size": self.vocabulary_size, "cutoffs": self.cutoffs,
                       "factor": self.factor})
        # only when set, so that the configs of heads without them stay as they were
        if not self.use_bias:
            config["use_bias"] = False
        if self.fairseq_2018:
            config["fairseq_2018"] = True
        if self.tail_widths is not None:
            config["tail_widths"] = list(self.tail_widths)
        return config
