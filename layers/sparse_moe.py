"""The sparsely-gated mixture-of-experts layer of Shazeer et al. (2017).

`y = Σ_i G(x)_i · E_i(x)` (equation 1) with the noisy top-k gate of equations 3–5, the
importance and load losses of §4 and Appendix A (equations 6–11), and optionally the two-level
hierarchical mixture of Appendix B (equations 12–14). Only the k experts a token is sent to are
evaluated on it.

`SparseMoE` owns the variables and the balance metrics and composes two parts, each readable
alone:

- the router (`zoo.layers.moe_router`): the noisy top-k gate, flat or hierarchical, with
  Importance and Load and the balancing losses;
- dispatch and combine (`zoo.layers.moe_dispatch`): the assignments sent to their experts and the
  gate-weighted outputs summed back, on one device or expert-parallel
  (`zoo.layers.expert_parallel`).

The names this module held before the split (`cv_squared`, `segment_matmul`, `sort_by`, ...)
are still importable from it.
"""

import contextlib
import math
import threading
import warnings
from typing import Optional, Union

import keras
import tensorflow as tf
from keras import ops

from zoo.layers import expert_parallel as ep
from zoo.layers import int8
from zoo.layers import moe_statistics
from zoo.layers.moe_dispatch import (ExpertParallelDispatch, ExpertWeights, dispatch_local, expert_capacity,
                                     mark_expert_matrix)
from zoo.layers.moe_router import (  # noqa: F401  (the names below were this module's before the split)
    CV_EPSILON,
    GateKernels,
    NoisyTopKRouter,
    Routing,
    balance_losses,
    balance_statistics,
    check_groups,
    check_k,
    check_noise,
    check_positive_int,
    check_weight,
    cv_squared,
    dense_gates,
    normal_cdf,
    sum_over_replicas,
)
from zoo.layers.segment_ops import SMALL_SEGMENT_ROWS, segment_matmul, sort_by  # noqa: F401

_metrics_pause = threading.local()  # .depth: how many `balance_metrics_paused` blocks are open


@contextlib.contextmanager
def balance_metrics_paused():
    """Deprecated: pass `track_metrics=False` to the call instead (a model's `call` takes it too;
    `step` and `prefill` never track). Within this block (in this thread), no `SparseMoE` call
    updates its balance metrics. The losses are unaffected."""
    # (layers/ imports nothing of the core, zoo.deprecation included: the warning is written here)
    warnings.warn("zoo.layers.sparse_moe.balance_metrics_paused() is deprecated; use track_metrics=False in the "
                  "layer's (or the model's) call.", DeprecationWarning, stacklevel=3)
    _metrics_pause.depth = getattr(_metrics_pause, "depth", 0) + 1
    try:
        yield
    finally:
        _metrics_pause.depth -= 1


def balance_metrics_are_paused() -> bool:
    return getattr(_metrics_pause, "depth", 0) > 0


def check_arguments(num_experts, k, hidden_units, output_units, importance_weight, load_weight, groups,
                    noisy_gating, noise_epsilon) -> None:
    """The architecture arguments of `SparseMoE`, in the order it has always checked them, so that
    the first bad one is the one reported (one sentence naming it and what is accepted)."""
    check_positive_int("num_experts", num_experts)
    check_positive_int("hidden_units", hidden_units)
    if output_units is not None:
        check_positive_int("output_units", output_units)
    check_groups(num_experts, groups)
    check_k(k, num_experts, groups)
    check_weight("importance_weight", importance_weight)
    check_weight("load_weight", load_weight)
    check_noise(noisy_gating, noise_epsilon)


def placement(expert_parallel: Optional[bool], capacity_factor: Optional[float]) -> tuple[bool, float]:
    """`(expert_parallel, capacity_factor)`, each None resolved from the innermost open
    `expert_parallelism()` block (`zoo.layers.expert_parallel`), else False and the default."""
    scoped = ep.scoped_capacity_factor()
    if expert_parallel is None:
        expert_parallel = scoped is not None
    if not isinstance(expert_parallel, bool):
        raise ValueError(f"expert_parallel must be True, False or None, got {expert_parallel!r}.")
    if capacity_factor is None:
        capacity_factor = scoped if scoped is not None else ep.DEFAULT_CAPACITY_FACTOR
    return expert_parallel, ep.check_capacity_factor(capacity_factor)


def glorot_limit(fan_in: int, fan_out: int) -> float:
    """The Glorot-uniform limit of one expert's own 2-D matrix: Keras would compute the fans of
    the stacked [E, a, b] tensor as E·a and E·b."""
    return math.sqrt(6.0 / (fan_in + fan_out))


class _Recorder:
    """Holds the list `SparseMoE.routing_recorded` yields (a plain object: Keras does not track
    it as layer state)."""

    def __init__(self, records):
        self.records = records


@keras.saving.register_keras_serializable(package="layers")
class SparseMoE(keras.layers.Layer):
    """A sparsely-gated mixture of feed-forward experts (Shazeer et al., 2017).

    Each expert is `E_i(x) = ReLU(x·W1_i + b1_i)·W2_i + b2_i` (the experts of §3.2 and Appendix
    C). The gate is the noisy top-k gate of equations 3–5 (`moe_router.NoisyTopKRouter`), flat or
    the hierarchical mixture of Appendix B with `groups=G`; `W_g` and `W_noise` start at zero
    (Appendix A), so every expert starts with the same expected load. Input of any rank is
    flattened to one batch of tokens (§3.1: all positions of all sequences are gated together),
    and the output takes back the input's leading shape. Dispatch is sparse
    (`moe_dispatch.dispatch_local`): computation per token does not grow with E.

    Losses (training only, through `add_loss`): `importance_weight · CV(Importance)²` (equations
    6–7) and `load_weight · CV(Load)²` (equation 11); a weight of 0 adds no loss at all.

    Metrics, averaged over the batches of an epoch as in Table 6 and shown in `fit` logs with
    the layer's name as prefix: `<name>_cv_importance` (CV, not squared, of Importance),
    `<name>_cv_load` and `<name>_max_load_ratio` (CV and max/mean of the number of tokens each
    expert actually receives). The per-expert slices have data-dependent sizes, so the layer sets
    `supports_jit = False`: a model holding it runs its steps as a `tf.function` without XLA.

    Variables: `expert_kernel_in` [E, d, h], `expert_bias_in` [E, h], `expert_kernel_out`
    [E, h, o], `expert_bias_out` [E, o] (every expert matrix a 2-D slice, for the factorised
    optimiser of Appendix D); `gate_kernel` (`W_g`, the primary gate when grouped), `noise_kernel`
    (`W_noise`), `secondary_gate_kernel` and `secondary_noise_kernel` ([G, d, E/G]).

    Args:
        num_experts: number of experts E.
        k: experts per token; an integer in [1, E], or with `groups` an integer (used at both
            levels) or a pair `(k_primary, k_secondary)`.
        hidden_units: width h of each expert's ReLU layer.
        output_units: output width o (the input width by default).
        importance_weight: `w_importance` of equation 7 (the paper's 0.1).
        load_weight: `w_load` of equation 11 (the paper's 0.1).
        groups: None for a flat mixture, or the number of groups of a hierarchical one; must
            divide `num_experts`.
        noisy_gating: add the trainable Gaussian noise of equation 4 while training.
        noise_epsilon: added to `Softplus(x·W_noise)`, the noise standard deviation.
        expert_parallel: shard the experts over the replicas of the `tf.distribute` strategy in
            scope when the layer is built (`zoo.layers.expert_parallel`); the layer then runs only
            inside that strategy's `strategy.run`. None (the default) follows an open
            `expert_parallelism()` block. Not part of the config: placement, not architecture.
        capacity_factor: with `expert_parallel`, each (replica, expert) pair takes at most
            ceil(capacity_factor · tokens per replica · experts per token / num_experts)
            assignments a call (`capacity`); the rest are dropped and counted in the metric
            `<name>_dropped` (`moe_dispatch.ExpertParallelDispatch`). Default 2.0.

    Call arguments:
        inputs: <float32>[..., d] (any leading shape, e.g. [batch, time, d]).
        training: draw the gate noise and add the losses.
        noise: replaces the standard-normal draws of a training call (see `route`).

    Returns:
        <float32>[..., o], the leading shape of `inputs` (the compute dtype of the layer).

    Example:

    >>> layer = SparseMoE(num_experts=4, k=2, hidden_units=16)
    >>> tuple(layer(keras.ops.ones((2, 3, 8))).shape)
    (2, 3, 8)
    """

    def __init__(self, num_experts: int, k: Union[int, list, tuple], hidden_units: int,
                 output_units: Optional[int] = None, importance_weight: float = 0.1, load_weight: float = 0.1,
                 groups: Optional[int] = None, noisy_gating: bool = True, noise_epsilon: float = 1e-2,
                 expert_parallel: Optional[bool] = None, capacity_factor: Optional[float] = None, **kwargs):
        if kwargs.get("name") is None:
            # Keras would derive "sparse_mo_e" from the class name; the metrics carry this name.
            uid = keras.backend.get_uid("sparse_moe")
            kwargs["name"] = "sparse_moe" if uid == 1 else f"sparse_moe_{uid - 1}"
        super().__init__(**kwargs)
        check_arguments(num_experts, k, hidden_units, output_units, importance_weight, load_weight, groups,
                        noisy_gating, noise_epsilon)
        self.num_experts = num_experts
        self.k = list(k) if isinstance(k, (list, tuple)) else k
        self.hidden_units = hidden_units
        self.output_units = output_units
        self.importance_weight = importance_weight
        self.load_weight = load_weight
        self.groups = groups
        self.noisy_gating = noisy_gating
        self.noise_epsilon = noise_epsilon
        self.expert_parallel, self.capacity_factor = placement(expert_parallel, capacity_factor)
        self.replicas = 1
        self.seed_generator = keras.random.SeedGenerator()
        self.router = NoisyTopKRouter(num_experts, k, groups, noisy_gating, noise_epsilon, seed=self.seed_generator)
        self.k_primary, self.k_secondary = self.router.k_primary, self.router.k_secondary
        self.dispatch = None  # an ExpertParallelDispatch, made by `build` when expert-parallel
        # Each expert's slice has a data-dependent number of rows, which XLA cannot compile; this
        # makes Keras' jit_compile="auto" (XLA on a GPU) fall back to plain tf.function.
        self.supports_jit = False
        # Whether calls update the metrics below (also off, for every MoE layer, inside
        # `balance_metrics_paused()`, which the SavedModel export traces its signatures in).
        self.track_metrics = True
        self._recorder = None  # a list of RoutingRecords inside `routing_recorded()`
        self._make_trackers()

    def _make_trackers(self):
        # Named after the layer so that two MoE layers of one model log separately.
        self.cv_importance_tracker = keras.metrics.Mean(name=f"{self.name}_cv_importance")
        self.cv_load_tracker = keras.metrics.Mean(name=f"{self.name}_cv_load")
        self.max_load_ratio_tracker = keras.metrics.Mean(name=f"{self.name}_max_load_ratio")
        if self.expert_parallel:
            # (token, expert) assignments over capacity, summed over the replicas and the steps
            self.dropped_tracker = keras.metrics.Sum(name=f"{self.name}_dropped")

    @property
    def experts_per_group(self) -> int:
        return self.num_experts // (self.groups or 1)

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None:
            raise ValueError(f"The last axis of the input must be known, got shape {input_shape}.")
        self.input_dim, self.output_dim = dim, self.output_units or dim
        if self.expert_parallel:
            self._build_expert_shards(dim, self.hidden_units, self.output_dim)
        else:
            self._build_experts(dim, self.hidden_units, self.output_dim)
        self._build_gates(dim)

    def _build_experts(self, dim, hidden, out):
        experts = self.num_experts

        def glorot(fan_in, fan_out):
            limit = glorot_limit(fan_in, fan_out)
            return keras.initializers.RandomUniform(-limit, limit)

        self.expert_kernel_in = self.add_weight(
            name="expert_kernel_in", shape=(experts, dim, hidden), initializer=glorot(dim, hidden))
        self.expert_bias_in = self.add_weight(name="expert_bias_in", shape=(experts, hidden), initializer="zeros")
        self.expert_kernel_out = self.add_weight(
            name="expert_kernel_out", shape=(experts, hidden, out), initializer=glorot(hidden, out))
        self.expert_bias_out = self.add_weight(name="expert_bias_out", shape=(experts, out), initializer="zeros")
        for kernel in (self.expert_kernel_in, self.expert_kernel_out):  # for the factorised Adam
            mark_expert_matrix(kernel)

    def _build_gates(self, dim):
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

    def _build_expert_shards(self, dim, hidden, out):
        """The expert variables of an expert-parallel layer: this replica's E/R experts, one
        per-replica (sync-on-read) variable each, initialised per replica, and the dispatch."""
        strategy = tf.distribute.get_strategy()
        self.replicas = ep.check_strategy(strategy, self.num_experts, self.name)
        local = self.num_experts // self.replicas
        specs = [("expert_kernel_in", (local, dim, hidden), glorot_limit(dim, hidden)),
                 ("expert_bias_in", (local, hidden), 0.0),
                 ("expert_kernel_out", (local, hidden, out), glorot_limit(hidden, out)),
                 ("expert_bias_out", (local, out), 0.0)]
        created = []
        with keras.name_scope(self.name, caller=self):
            for name, shape, limit in specs:
                variable = keras.Variable(
                    initializer="zeros", shape=shape, dtype=self.variable_dtype, name=name,
                    synchronization="on_read", aggregation="only_first_replica")
                variable.expert_shard = True
                if "kernel" in name:
                    mark_expert_matrix(variable)
                setattr(self, name, variable)  # tracked by the layer, trainable
                created.append((variable, limit))
        seed = int(tf.random.uniform([], maxval=2**30, dtype=tf.int32))
        ep.init_shards(strategy, created, seed)
        self.dispatch = ExpertParallelDispatch(ep.ExpertExchange(strategy), self.num_experts, self.capacity_factor,
                                               self.k_primary * (self.k_secondary or 1), name=self.name)

    # ---- the parts ---------------------------------------------------------------------
    def gate_kernels(self) -> GateKernels:
        """The router's weights (those the layer has: no noise kernels without noisy gating)."""
        return GateKernels(self.gate_kernel, getattr(self, "noise_kernel", None),
                           getattr(self, "secondary_gate_kernel", None), getattr(self, "secondary_noise_kernel", None))

    def expert_weights(self) -> ExpertWeights:
        """The experts' weights (this replica's shard when expert-parallel), in the compute dtype;
        int8 kernels come with their scales (`quantize`)."""
        kernel_in, scale_in = int8.quantized_and_scale(self, self.expert_kernel_in, self.compute_dtype)
        kernel_out, scale_out = int8.quantized_and_scale(self, self.expert_kernel_out, self.compute_dtype)
        return ExpertWeights(kernel_in, self.expert_bias_in, kernel_out, self.expert_bias_out, scale_in,
                             scale_out).cast(self.compute_dtype)

    def quantize(self, mode="int8", **kwargs):
        """The experts' kernels as int8, each with a float32 scale per expert and output channel
        (`[E, h]` and `[E, o]`, `zoo.layers.int8`), applied to each row's product; the gate (whose
        top-k decides the routing) and the biases stay float32."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        if self.expert_parallel:
            raise ValueError(f"{self.name} is expert-parallel; quantize a one-device model (zoo.load the preset "
                             "it saved) instead.")
        self.expert_kernel_in = int8.replace(self, self.expert_kernel_in, axis=(0, -1))
        self.expert_kernel_out = int8.replace(self, self.expert_kernel_out, axis=(0, -1))

    def route(self, flat_x: tf.Tensor, training: bool = False, noise=None) -> Routing:
        """Who goes where, for tokens `flat_x` <float>[n, d] (`NoisyTopKRouter.route`).

        Returns:
            The `Routing`: `token_ids`, `expert_ids`, `gates` (one entry per (token, expert)
            assignment), `importance` and `load` ([num_experts], equations 6 and 10, or 13 and
            14) and `counts` ([num_experts], tokens each expert receives).

        `noise` replaces the standard-normal draws of a training call: [n, num_experts] for a
        flat layer; for a grouped one a pair `([n, groups], [n, groups, experts_per_group])` of
        which only the groups each token is sent to are read.
        """
        flat_x = ops.cast(flat_x, self.compute_dtype)
        return self.router.route(flat_x, self.gate_kernels(), training, noise)

    def gates(self, x: tf.Tensor, training: bool = False, noise=None) -> tf.Tensor:
        """The dense <float32>[tokens, num_experts] gate matrix (tokens = all leading positions of
        `x`), zero outside each token's experts; for testing and inspection, not for the forward
        pass."""
        if not self.built:
            self.build(tuple(x.shape))
        flat = ops.reshape(x, (-1, self.input_dim))
        return dense_gates(self.route(flat, training, noise), ops.shape(flat)[0], self.num_experts)

    def capacity(self, tokens_per_replica) -> tf.Tensor:
        """Assignments each (replica, expert) pair can receive in one exchange:
        ceil(capacity_factor · tokens per replica · experts per token / num_experts), an int32
        tensor (tokens per replica: the mean over the replicas, so that every replica agrees)."""
        return expert_capacity(self.capacity_factor, tokens_per_replica, self.k_primary * (self.k_secondary or 1),
                               self.num_experts)

    def _balance(self, routing: Routing, training: bool, track: bool):
        """The losses of equations 7 and 11 (training only) and, with `track`, Table 6's metrics."""
        if training:
            for loss in balance_losses(routing, self.importance_weight, self.load_weight):
                self.add_loss(loss)
        if not track:
            return
        cv_importance, cv_load, max_load_ratio = balance_statistics(routing)
        self.cv_importance_tracker.update_state(cv_importance)
        self.cv_load_tracker.update_state(cv_load)
        self.max_load_ratio_tracker.update_state(max_load_ratio)

    @contextlib.contextmanager
    def routing_recorded(self):
        """Within this block, every eager call of the layer appends the `RoutingRecord` of its
        batch (`zoo.layers.moe_statistics`: counts, Importance, Load, the router's entropy) to the
        list it yields; `moe_statistics.summarize` turns them into the balance statistics."""
        records, previous = [], self._recorder
        self._recorder = _Recorder(records)
        try:
            yield records
        finally:
            self._recorder = previous

    # ---- the layer ---------------------------------------------------------------------
    def call(self, inputs, training=None, noise=None, track_metrics=None):
        training = bool(training)
        track = self.track_metrics if track_metrics is None else bool(track_metrics)
        track = track and not balance_metrics_are_paused()
        flat = ops.reshape(inputs, (-1, self.input_dim))  # §3.1: every position is one token
        routing = self.route(flat, training, noise)
        if self._recorder is not None:
            distribution = self.router.gate_distribution(ops.cast(flat, self.compute_dtype), self.gate_kernels())
            self._recorder.records.append(moe_statistics.record(routing, distribution))
        if self.expert_parallel:
            outputs, dropped = self.dispatch(flat, routing, self.expert_weights())
            if track:
                self.dropped_tracker.update_state(dropped)
        else:
            outputs = dispatch_local(flat, routing, self.expert_weights())
        self._balance(routing, training, track)
        return ops.reshape(outputs, tuple(ops.shape(inputs)[:-1]) + (self.output_dim,))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_units or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_experts": self.num_experts,
                "k": self.k,
                "hidden_units": self.hidden_units,
                "output_units": self.output_units,
                "importance_weight": self.importance_weight,
                "load_weight": self.load_weight,
                "groups": self.groups,
                "noisy_gating": self.noisy_gating,
                "noise_epsilon": self.noise_epsilon,
            }
        )
        return config
