"""The router of the sparsely-gated mixture of experts (Shazeer et al. 2017): who goes where.

`NoisyTopKRouter` is the noisy top-k gate of §2.1 (equations 3–5), flat or the two-level
hierarchy of Appendix B (equations 12–14). It returns a `Routing`: one entry per (token, expert)
assignment, and the batch-wide Importance and Load of §4 and Appendix A (equations 6 and 10, or
13 and 14) from which `balance_losses` makes the balancing losses (equations 7 and 11). It is a
Keras layer owning the gate weights, the router part of `zoo.layers.SparseMoE`; `route` also takes
other weights (`GateKernels`), for tests that route by hand-made logits.

Where the text leaves a choice, the authors' tensor2tensor code (`expert_utils.py`) is followed:
the noise is drawn in training only (inference is deterministic), `noise_epsilon` is added to the
noise standard deviation so that the normal CDF of equation 9 never divides by zero, and
`kth_excluding(H(x), k, i)` is the (k+1)-th largest entry of `H(x)` when expert i is among the top
k and the k-th largest otherwise. Ties go to the lower expert index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional, TypedDict, Union

import keras
import tensorflow as tf
from keras import ops

from zoo.layers.moe_parts import MixturePart
from zoo.layers.segment_ops import segment_matmul, sort_by
from zoo.layers.validation import check_int, check_number, is_int

# Keeps CV² finite when every value is 0 (e.g. an empty batch); far below any real mean².
CV_EPSILON = 1e-10


class Routing(TypedDict):
    """Who goes where, for n tokens and E experts (A assignments: n · k, or n · k_primary ·
    k_secondary when hierarchical).

    Keys:
        token_ids: <int32>[A], the token of each assignment (token by token).
        expert_ids: <int32>[A], its expert in [0, E).
        gates: <float32>[A] (float64 for float64 inputs), its gate value G(x)_i.
        importance: <float32>[E], Σ_x G(x)_i (equation 6, or 13).
        load: <float32>[E], the smooth Load of equation 10 (or 14) when the gate is noisy, else
            the hard count.
        counts: <float32>[E], the tokens each expert receives.

    Example: three tokens, two experts each of four, from a router whose weights start at zero
    (so every gate is 1/2 and the lowest experts win the ties).

    >>> from zoo.layers import NoisyTopKRouter
    >>> routing = NoisyTopKRouter(num_experts=4, k=2)(keras.ops.ones((3, 8)))
    >>> sorted(routing)
    ['counts', 'expert_ids', 'gates', 'importance', 'load', 'token_ids']
    >>> routing["token_ids"].numpy().tolist(), routing["expert_ids"].numpy().tolist()
    ([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1])
    >>> routing["importance"].numpy().tolist(), routing["counts"].numpy().tolist()
    ([1.5, 1.5, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0])
    """

    token_ids: tf.Tensor
    expert_ids: tf.Tensor
    gates: tf.Tensor
    importance: tf.Tensor
    load: tf.Tensor
    counts: tf.Tensor


class GateKernels(NamedTuple):
    """The router's weights (d: input width; m: E for a flat router, G for a hierarchical one).

    Fields:
        gate: <float>[d, m], `W_g` (the primary gate when hierarchical).
        noise: <float>[d, m], `W_noise`; needed only for a noisy gate in training.
        secondary_gate: <float>[G, d, E/G], each group's `W_g` (hierarchical only).
        secondary_noise: <float>[G, d, E/G], each group's `W_noise` (hierarchical, noisy, training).
    """

    gate: tf.Tensor
    noise: Optional[tf.Tensor] = None
    secondary_gate: Optional[tf.Tensor] = None
    secondary_noise: Optional[tf.Tensor] = None


# ---- argument checks (one sentence per bad value) ---------------------------------------------
def check_positive_int(name: str, value: int) -> int:
    return check_int(name, value, minimum=1)


def check_weight(name: str, value: float) -> float:
    return check_number(name, value, minimum=0)


def check_groups(num_experts: int, groups: Optional[int]) -> None:
    """`groups` is None or a positive integer dividing `num_experts`."""
    if groups is None:
        return
    check_positive_int("groups", groups)
    if num_experts % groups:
        raise ValueError(
            f"groups must divide num_experts: {num_experts} experts cannot be split "
            f"into groups={groups} equal groups."
        )


def check_k(k, num_experts: int, groups: Optional[int]) -> tuple[int, Optional[int]]:
    """`k` as a pair `(k_primary, k_secondary)`; for a flat router k_primary is the only one."""
    if groups is None:
        check_int("k", k, 1, num_experts, bounds=f"[1, num_experts] = [1, {num_experts}]")
        return k, None
    per_group = num_experts // groups
    if isinstance(k, (list, tuple)) and len(k) == 2:
        levels = tuple(k)
    elif is_int(k):
        levels = (k, k)
    else:
        raise ValueError(
            f"k must be an integer or a pair (k_primary, k_secondary) when groups is set, got {k!r}."
        )
    k_primary, k_secondary = levels
    for value, limit, what in ((k_primary, groups, "groups"), (k_secondary, per_group, "experts per group")):
        check_int(f"k={k!r} does not fit {groups} groups of {per_group} experts: each level's k",
                  value, 1, limit, bounds=f"[1, {what}] = [1, {limit}]")
    return k_primary, k_secondary


def check_noise(noisy_gating: bool, noise_epsilon: float) -> None:
    check_weight("noise_epsilon", noise_epsilon)
    if not isinstance(noisy_gating, bool):
        raise ValueError(f"noisy_gating must be True or False, got {noisy_gating!r}.")


# ---- the statistics of §4 and Appendix A ------------------------------------------------------
def cv_squared(values) -> tf.Tensor:
    """Squared coefficient of variation of a vector: population variance / mean².

    The population variance (divide by the number of values, not by one less) is used, as in
    the authors' own code; `CV_EPSILON` in the denominator keeps an all-zero vector at 0.

    Args:
        values: <float>[m].

    Returns:
        <float>[] in the dtype of `values`.
    """
    values = ops.convert_to_tensor(values)
    mean = ops.mean(values)
    variance = ops.mean(ops.square(values - mean))
    return variance / (ops.square(mean) + CV_EPSILON)


def normal_cdf(z: tf.Tensor) -> tf.Tensor:
    """Φ, the CDF of the standard normal distribution (equation 9)."""
    return 0.5 * (1.0 + ops.erf(z / math.sqrt(2.0)))


def sum_over_replicas(*values: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Each of `values` summed over the replicas of a synchronous distributed step, in one
    all-reduce; unchanged outside one.

    The balancing losses are functions of batch-wide sums (Importance, Load, §4 and Appendix A),
    so under `MirroredStrategy` or `MultiWorkerMirroredStrategy` they are computed on the global
    batch, as on one device, not as a mean of per-replica CV²s. The all-reduce's gradient is an
    all-reduce, so each replica receives the gradient of the global losses."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values
    shapes = [ops.shape(v) for v in values]
    flat = ops.concatenate([ops.reshape(v, (-1,)) for v in values], axis=0)
    flat = context.all_reduce(tf.distribute.ReduceOp.SUM, flat)
    sizes = [int(math.prod(shape)) for shape in shapes]
    return tuple(ops.reshape(part, shape) for part, shape in zip(tf.split(flat, sizes), shapes))


def balance_losses(routing: Routing, importance_weight: float, load_weight: float) -> list[tf.Tensor]:
    """`importance_weight · CV(Importance)²` (equation 7) and `load_weight · CV(Load)²`
    (equation 11), scalars; a weight of 0 gives no loss at all (an empty list for both)."""
    losses = []
    if importance_weight:
        losses.append(importance_weight * cv_squared(routing["importance"]))
    if load_weight:
        losses.append(load_weight * cv_squared(routing["load"]))
    return losses


def balance_statistics(routing: Routing) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Table 6's statistics, on the tokens the experts really receive, without gradients:
    `(CV(Importance), CV(counts), max(counts) / mean(counts))`, scalars."""
    importance = ops.stop_gradient(routing["importance"])
    counts = ops.stop_gradient(routing["counts"])
    return (ops.sqrt(cv_squared(importance)), ops.sqrt(cv_squared(counts)),
            ops.max(counts) / (ops.mean(counts) + CV_EPSILON))


def dense_gates(routing: Routing, num_tokens, num_experts: int) -> tf.Tensor:
    """The <float>[num_tokens, num_experts] gate matrix of `routing`, zero outside each token's
    experts; for testing and inspection, not for the forward pass."""
    index = routing["token_ids"] * num_experts + routing["expert_ids"]
    dense = tf.math.unsorted_segment_sum(routing["gates"], index, num_tokens * num_experts)
    return ops.reshape(dense, (-1, num_experts))


# ---- the gate -----------------------------------------------------------------------------------
def noisy_top_k(clean, k: int, raw_noise=None, noise_epsilon: float = 1e-2, noise=None, seed=None):
    """Equations 3–5 on `clean = x·W_g` and, for a noisy gate, `raw_noise = x·W_noise`.

    Args:
        clean: <float32>[n, m] (float64 for float64 inputs).
        k: experts kept per token, in [1, m].
        raw_noise: <float32>[n, m], or None for a gate without noise (inference).
        noise_epsilon: added to `Softplus(raw_noise)`, the noise standard deviation.
        noise: <float>[n, m] standard-normal draws to use, or None to draw them from `seed`.
        seed: an int or a `keras.random.SeedGenerator` for those draws.

    Returns:
        `(kept, gates, probability, in_top)`: the kept experts <int32>[n, k], their gates [n, k]
        (softmax over the kept k), the per-token contribution to Load [n, m] (P(x, i) of equation
        9, or the 0/1 top-k indicator when the gate is not noisy or k = m) and the 0/1 top-k
        indicator [n, m].
    """
    m = clean.shape[-1]
    noisy = raw_noise is not None
    if noisy:
        stddev = ops.softplus(raw_noise) + noise_epsilon
        if noise is None:
            noise = keras.random.normal(ops.shape(clean), dtype=clean.dtype, seed=seed)
        logits = clean + ops.cast(noise, clean.dtype) * stddev  # H(x), equation 4
    else:
        logits = clean
    # One value past the k-th: the threshold an expert already in the top k must stay above.
    top_values, top_indices = ops.top_k(logits, min(k + 1, m))
    kept = top_indices[:, :k]
    if k == 1:  # a softmax over one value is 1: no gradient reaches W_g (§2.1 wants k > 1)
        gates = ops.ones_like(top_values[:, :1])
    else:
        gates = ops.softmax(top_values[:, :k], axis=-1)  # Softmax(KeepTopK(H(x), k))
    in_top = ops.sum(ops.one_hot(kept, m, dtype=clean.dtype), axis=1)
    if not (noisy and k < m):
        return kept, gates, in_top, in_top
    # kth_excluding(H(x), k, i): the (k+1)-th value for an expert in the top k, else the k-th.
    threshold = ops.where(in_top > 0, top_values[:, k : k + 1], top_values[:, k - 1 : k])
    probability = normal_cdf((clean - threshold) / stddev)  # P(x, i), equation 9
    return kept, gates, probability, in_top


def _gate_dtype(x) -> str:
    """float32 for float16/bfloat16/float32 inputs (mixed precision), float64 for float64: the
    gate's softmax, noise and normal CDF run in it."""
    return "float64" if keras.backend.standardize_dtype(x.dtype) == "float64" else "float32"


class NoisyTopKRouter(MixturePart, keras.layers.Layer):
    """The noisy top-k gate of Shazeer et al. (2017), flat (§2.1) or hierarchical (Appendix B): a
    Keras layer that owns the gate's weights and returns a `Routing`.

    Flat: `H(x) = x·W_g + StandardNormal()·(Softplus(x·W_noise) + noise_epsilon)` (equation 4,
    noise in training only), keep the k largest entries of `H(x)`, softmax over those k
    (equations 3 and 5). Hierarchical (`groups=G`): a primary gate of that kind over G groups,
    and in each group a secondary one over its `num_experts / G` experts, evaluated only on the
    tokens the primary gate sends there (`X^(i)`); `G_primary(x)_i · G_i(x)_j` is the gate of
    expert `(i, j)`, which is expert `i · num_experts / G + j` (equation 12). Importance and Load
    follow equations 6 and 10, or 13 and 14. Under a `tf.distribute` strategy they are summed over
    the replicas (`sum_over_replicas`).

    Variables (built from the input width d, all starting at zero as in Appendix A, so that every
    expert starts with the same expected load): `gate_kernel` (`W_g`, [d, E], or [d, G] when
    hierarchical), `noise_kernel` (`W_noise`, noisy gating only), `secondary_gate_kernel` and
    `secondary_noise_kernel` ([G, d, E/G]).

    This is the router `zoo.layers.SparseMoE` makes by default. Any Keras layer whose
    `call(x, training=None, noise=None)` takes tokens <float>[n, d] and returns a `Routing` can
    take its place (`SparseMoE(..., router=...)`).

    Args:
        num_experts: the number of experts E.
        k: experts per token; an integer in [1, E], or with `groups` an integer (used at both
            levels) or a pair `(k_primary, k_secondary)`.
        groups: None for a flat router, or the number of groups G (dividing E).
        noisy_gating: add the Gaussian noise of equation 4 in training.
        noise_epsilon: added to the noise standard deviation.
        seed: an int or a `keras.random.SeedGenerator` for the noise draws (a new generator when
            None); a `SparseMoE` passes its own.

    Example:

    >>> router = NoisyTopKRouter(num_experts=4, k=2)
    >>> routing = router(keras.ops.ones((3, 8)))
    >>> routing["expert_ids"].numpy().tolist(), routing["gates"].numpy().tolist()
    ([0, 1, 0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    """

    def __init__(self, num_experts: int, k: int | Sequence[int], groups: Optional[int] = None, noisy_gating: bool = True,
                 noise_epsilon: float = 1e-2, seed: Union[int, keras.random.SeedGenerator, None] = None, **kwargs):
        check_positive_int("num_experts", num_experts)
        check_groups(num_experts, groups)
        k_primary, k_secondary = check_k(k, num_experts, groups)
        check_noise(noisy_gating, noise_epsilon)
        super().__init__(**kwargs)
        self.k_primary, self.k_secondary = k_primary, k_secondary
        self.num_experts = num_experts
        self.k = list(k) if isinstance(k, (list, tuple)) else k
        self.groups = groups
        self.noisy_gating = noisy_gating
        self.noise_epsilon = noise_epsilon
        self.seed_generator = seed if isinstance(seed, keras.random.SeedGenerator) else keras.random.SeedGenerator(seed)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        dim = input_shape[-1]
        # Appendix A: zero gate and noise weights, "no signal and some noise", balanced loads.
        shape = (dim, self.groups or self.num_experts)
        self.gate_kernel = self.add_weight(name="gate_kernel", shape=shape, initializer="zeros")
        if self.noisy_gating:
            self.noise_kernel = self.add_weight(name="noise_kernel", shape=shape, initializer="zeros")
        if self.groups:
            shape = (self.groups, dim, self.experts_per_group)
            self.secondary_gate_kernel = self.add_weight(name="secondary_gate_kernel", shape=shape,
                                                         initializer="zeros")
            if self.noisy_gating:
                self.secondary_noise_kernel = self.add_weight(name="secondary_noise_kernel", shape=shape,
                                                              initializer="zeros")

    def gate_kernels(self) -> GateKernels:
        """The router's own weights (those it has: no noise kernels without noisy gating)."""
        return GateKernels(self.gate_kernel, getattr(self, "noise_kernel", None),
                           getattr(self, "secondary_gate_kernel", None), getattr(self, "secondary_noise_kernel", None))

    def call(self, x: tf.Tensor, training: bool | None = None,
             noise: tf.Tensor | tuple[tf.Tensor, tf.Tensor] | None = None) -> Routing:
        return self.route(x, None, bool(training), noise)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"num_experts": self.num_experts, "k": self.k, "groups": self.groups,
                       "noisy_gating": self.noisy_gating, "noise_epsilon": self.noise_epsilon})
        return config

    @property
    def experts_per_group(self) -> int:
        return self.num_experts // (self.groups or 1)

    def route(self, x: tf.Tensor, kernels: Optional[GateKernels] = None, training: bool = False,
              noise: tf.Tensor | tuple[tf.Tensor, tf.Tensor] | None = None) -> Routing:
        """Who goes where, for tokens `x` (the layer's call, with the weights given or its own).

        Args:
            x: <float>[n, d], the tokens in the compute dtype (the kernels are cast to it).
            kernels: gate weights to use in place of the layer's own (None: its own, built from
                `x`'s width if need be).
            training: draw (or use) the noise of a noisy gate.
            noise: replaces the standard-normal draws of a training call: <float>[n, E] for a flat
                router; for a hierarchical one a pair `([n, G], [n, G, E/G])` of which only the
                groups each token is sent to are read.

        Returns:
            The `Routing`: assignments token by token, Importance, Load and counts.
        """
        kernels = self._kernels(x, kernels)
        if self.groups:
            return self._route_hierarchical(x, kernels, training, noise)
        return self._route_flat(x, kernels, training, noise)

    def _kernels(self, x, kernels):
        if kernels is not None:
            return kernels
        if not self.built:
            self.build(tuple(x.shape))
            self.built = True
        return self.gate_kernels()

    def gate_distribution(self, x: tf.Tensor, kernels: Optional[GateKernels] = None) -> tf.Tensor:
        """The full gate distribution before top-k, without noise: <float32>[n, E], each row
        `Softmax(x·W_g)` over every expert (flat), or over every (group, expert) pair
        `Softmax(x·W_g)_i · Softmax(x·W_i)_j` (hierarchical: every group's secondary gate on
        every token, which routing never computes). What the router's entropy is measured on
        (`zoo.layers.moe_statistics`); for inspection, not for the forward pass."""
        kernels = self._kernels(x, kernels)
        primary = ops.softmax(self._gate_logits(x, kernels.gate), axis=-1)
        if not self.groups:
            return primary
        secondary = ops.einsum("nd,gde->nge", x, ops.cast(kernels.secondary_gate, x.dtype))
        secondary = ops.softmax(ops.cast(secondary, primary.dtype), axis=-1)
        return ops.reshape(primary[:, :, None] * secondary, (-1, self.num_experts))

    def _gate_logits(self, x, kernel):
        """`x · kernel` in the compute dtype, then in the gate's dtype (`_gate_dtype`)."""
        logits = ops.matmul(x, ops.cast(kernel, x.dtype))
        return ops.cast(logits, _gate_dtype(x))

    def _primary_gate(self, x, kernels, training, noise):
        """The gate over the experts (flat) or the groups (hierarchical), equations 3–5:
        `(token_ids, chosen ids, gates)`, one entry per assignment, token by token, and the
        per-token Load contributions and top-k indicator of `noisy_top_k`."""
        n = ops.shape(x)[0]
        noisy = training and self.noisy_gating
        raw = self._gate_logits(x, kernels.noise) if noisy else None  # no noise at inference
        clean = self._gate_logits(x, kernels.gate)
        kept, gates, probability, in_top = noisy_top_k(clean, self.k_primary, raw, self.noise_epsilon,
                                                       noise if noisy else None, self.seed_generator)
        token_ids = tf.repeat(tf.range(n), self.k_primary)
        return token_ids, ops.reshape(kept, (-1,)), ops.reshape(gates, (-1,)), probability, in_top

    def _route_flat(self, x, kernels, training, noise):
        token_ids, expert_ids, gates, probability, in_top = self._primary_gate(x, kernels, training, noise)
        importance, load, counts = sum_over_replicas(
            tf.math.unsorted_segment_sum(gates, expert_ids, self.num_experts),  # equation 6
            ops.sum(probability, axis=0),  # equation 10
            ops.cast(ops.sum(in_top, axis=0), probability.dtype),
        )
        return Routing(token_ids=token_ids, expert_ids=expert_ids, gates=gates, importance=importance,
                       load=load, counts=counts)

    def _secondary_gate(self, x, kernels, token_ids, group_ids, sizes, training, noise):
        """Each group's gate on X^(i), the (token, group) pairs sorted by group (`sizes` per
        group): one segment matmul for the clean and the noise logits of every group together."""
        noisy = training and self.noisy_gating
        per_group = self.experts_per_group
        stacked = [kernels.secondary_gate] + ([kernels.secondary_noise] if noisy else [])
        kernel = ops.cast(ops.concatenate(stacked, axis=-1), x.dtype)  # one matmul for both
        logits = segment_matmul(tf.gather(x, token_ids), sizes, kernel)
        logits = ops.cast(logits, _gate_dtype(x))
        raw = logits[:, per_group:] if noisy else None
        if noise is not None and noisy:
            pairs = ops.stack([token_ids, group_ids], axis=1)
            noise = tf.gather_nd(ops.convert_to_tensor(noise), pairs)
        return noisy_top_k(logits[:, :per_group], self.k_secondary, raw, self.noise_epsilon,
                           noise if noisy else None, self.seed_generator)

    def _route_hierarchical(self, x, kernels, training, noise):
        """Appendix B: the primary gate picks groups, then each group's secondary gate picks its
        experts, run only on X^(i), the tokens the primary gate sends to group i, so a token pays
        for k_primary secondary gates, not for all of them."""
        primary_noise, secondary_noise = noise if noise is not None else (None, None)
        token_ids, group_ids, group_gates, probability, in_top = self._primary_gate(
            x, kernels, training, primary_noise)
        order, sizes = sort_by(group_ids, self.groups)  # the (token, group) pairs, group by group
        token_ids, group_ids, group_gates = (tf.gather(t, order) for t in (token_ids, group_ids, group_gates))
        kept, gates, probability_s, in_top_s = self._secondary_gate(
            x, kernels, token_ids, group_ids, sizes, training, secondary_noise)
        expert_ids = ops.reshape(group_ids[:, None] * self.experts_per_group + kept, (-1,))
        expert_gates = ops.reshape(group_gates[:, None] * gates, (-1,))  # equation 12
        importance, load, counts = self._hierarchical_sums(
            expert_ids, expert_gates, group_ids, probability, in_top, probability_s, in_top_s)
        return Routing(token_ids=tf.repeat(token_ids, self.k_secondary), expert_ids=expert_ids,
                       gates=expert_gates, importance=importance, load=load, counts=counts)

    def _hierarchical_sums(self, expert_ids, expert_gates, group_ids, probability, in_top, probability_s,
                           in_top_s):
        """Importance_H (equation 13), Load_H (equation 14) and the counts, all [E], from the
        primary gate's per-token terms and the secondary gates' per-(token, group) terms."""
        groups = self.groups
        importance, primary_load, tokens_per_group, secondary_load, counts = sum_over_replicas(
            # equation 13: Σ_x G_primary(x)_i · G_i(x)_j
            tf.math.unsorted_segment_sum(expert_gates, expert_ids, self.num_experts),
            ops.sum(probability, axis=0)[:, None],  # Load_primary(X)
            ops.cast(ops.sum(in_top, axis=0), probability.dtype)[:, None],  # |X^(i)|
            tf.math.unsorted_segment_sum(probability_s, group_ids, groups),  # Load_i(X^(i))
            ops.cast(tf.math.unsorted_segment_sum(in_top_s, group_ids, groups), probability.dtype),
        )
        # Equation 14. A group that received no token has a zero secondary load: max(·, 1) only
        # avoids 0/0.
        load = primary_load * secondary_load / ops.maximum(tokens_per_group, 1.0)
        return importance, ops.reshape(load, (-1,)), ops.reshape(counts, (-1,))
