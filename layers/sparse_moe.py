"""The sparsely-gated mixture-of-experts layer of Shazeer et al. (2017).

`y = Σ_i G(x)_i · E_i(x)` (equation 1) with the noisy top-k gate of equations 3–5, the
importance and load losses of §4 and Appendix A (equations 6–11), and optionally the two-level
hierarchical mixture of Appendix B (equations 12–14). Only the k experts a token is sent to are
evaluated on it.

`SparseMoE` owns the balance losses and metrics and composes two Keras layers, each owning its
weights and usable alone, and each replaceable by a layer of one's own (`router=`, `experts=`):

- the router (`zoo.layers.moe_router.NoisyTopKRouter`): the noisy top-k gate, flat or
  hierarchical, returning a `Routing` with Importance and Load;
- the experts (`zoo.layers.moe_experts.FeedForwardExperts`): the experts' stacked weights, and
  dispatch and combine (`zoo.layers.moe_dispatch`): the assignments sent to their experts and the
  gate-weighted outputs summed back, on one device or expert-parallel
  (`zoo.layers.expert_parallel`).

The names this module held before the split (`cv_squared`, `segment_matmul`, `sort_by`, ...)
are still importable from it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Optional, Union

import numpy as np

import keras
import tensorflow as tf
from keras import ops

from zoo.compat import own_variables
from zoo.layers import expert_parallel as ep
from zoo.layers import int8
from zoo.layers import moe_statistics
from zoo.layers.moe_dispatch import ExpertParallelDispatch, ExpertWeights, expert_capacity
from zoo.layers.moe_experts import FeedForwardExperts, glorot_limit  # noqa: F401  (glorot_limit: this module's before)
from zoo.layers.moe_parts import MixturePart
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
    from zoo.deprecation import warn  # a leaf module: layers/ imports nothing else of the core

    warn("zoo.layers.sparse_moe.balance_metrics_paused()", "track_metrics=False in the layer's (or the model's) "
         "call", stacklevel=4)
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


class _Recorder:
    """Holds the list `SparseMoE.routing_recorded` yields (a plain object: Keras does not track
    it as layer state)."""

    def __init__(self, records):
        self.records = records


def _check_part(part, what, num_experts, expected):
    """A router or experts layer given to `SparseMoE`: a Keras layer of `num_experts` experts."""
    if not isinstance(part, keras.layers.Layer):
        raise ValueError(f"{what} must be a Keras layer ({expected}), got {type(part).__name__}.")
    theirs = getattr(part, "num_experts", num_experts)
    if theirs != num_experts:
        raise ValueError(f"The {what} {part.name!r} has num_experts={theirs} but the SparseMoE has "
                         f"num_experts={num_experts}; give both the same number of experts.")
    return part


def _part_variable(part, name):
    def get(self) -> keras.Variable:
        return getattr(getattr(self, part), name)

    get.__doc__ = f"`self.{part}.{name}` (the variable lives in the {part} layer)."
    return property(get)


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

    Parts: `router` (a `moe_router.NoisyTopKRouter` by default) and `experts` (a
    `moe_experts.FeedForwardExperts`), Keras layers that own their variables; either can be a
    layer of one's own (`router=`, `experts=`). The default parts' variables are also reachable
    here under the names the layer has always used: `expert_kernel_in` [E, d, h],
    `expert_bias_in` [E, h], `expert_kernel_out` [E, h, o], `expert_bias_out` [E, o] (every expert
    matrix a 2-D slice, for the factorised optimiser of Appendix D); `gate_kernel` (`W_g`, the
    primary gate when grouped), `noise_kernel` (`W_noise`), `secondary_gate_kernel` and
    `secondary_noise_kernel` ([G, d, E/G]). Their paths name the part (`<layer>/router/gate_kernel`,
    `<layer>/experts/expert_kernel_in`); the order the layer saves them in is that of every
    earlier release (`moe_parts`).

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
        router: a Keras layer to route with in place of the noisy top-k gate: its
            `call(x, training=None, noise=None)` takes tokens <float>[n, d] (`noise` only when a
            caller gives it) and returns a `moe_router.Routing` over `num_experts` experts; the
            losses and metrics are computed from that Routing. It is saved with the layer's
            config (`keras.saving.serialize_keras_object`), so register it as serializable.
        experts: a Keras layer to compute the experts with in place of `FeedForwardExperts`:
            `call(x, routing)` takes tokens <float>[n, d] and the Routing and returns the
            gate-weighted sums <float>[n, o]. Not with `expert_parallel`.

    Call arguments:
        inputs: <float32>[..., d] (any leading shape, e.g. [batch, time, d]).
        training: draw the gate noise and add the losses.
        noise: replaces the standard-normal draws of a training call (see `route`).
        track_metrics: update the balance metrics (default: the layer's `track_metrics`, True);
            the losses do not depend on it. A served graph passes False.

    Returns:
        <float32>[..., o], the leading shape of `inputs` (the compute dtype of the layer).

    Example:

    >>> layer = SparseMoE(num_experts=4, k=2, hidden_units=16)
    >>> tuple(layer(keras.ops.ones((2, 3, 8))).shape)
    (2, 3, 8)
    """

    def __init__(self, num_experts: int, k: Union[int, Sequence[int]], hidden_units: int,
                 output_units: Optional[int] = None, importance_weight: float = 0.1, load_weight: float = 0.1,
                 groups: Optional[int] = None, noisy_gating: bool = True, noise_epsilon: float = 1e-2,
                 expert_parallel: Optional[bool] = None, capacity_factor: Optional[float] = None,
                 router: Optional[keras.layers.Layer] = None, experts: Optional[keras.layers.Layer] = None,
                 **kwargs):
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
        self.k_primary, self.k_secondary = check_k(k, num_experts, groups)
        self.experts_per_token = self.k_primary * (self.k_secondary or 1)
        self.seed_generator = keras.random.SeedGenerator()
        # The parts, experts first: the order the layer has always listed its variables in
        # (the optimiser's slots of a training checkpoint are matched by that order).
        self._given_parts = {"experts": experts is not None, "router": router is not None}
        if experts is None:
            experts = FeedForwardExperts(num_experts, hidden_units, output_units, self.expert_parallel,
                                         dtype=self.dtype_policy, name="experts")
        elif self.expert_parallel:
            raise ValueError(f"{self.name}: expert_parallel shards the experts the layer makes itself; give "
                             "experts=None, or expert_parallel=False with experts of your own.")
        if router is None:
            router = NoisyTopKRouter(num_experts, k, groups, noisy_gating, noise_epsilon, seed=self.seed_generator,
                                     dtype=self.dtype_policy, name="router")
        self.experts = _check_part(experts, "experts", num_experts, "call(x, routing) -> [n, output width]")
        self.router = _check_part(router, "router", num_experts, "call(x, training=None, noise=None) -> Routing")
        for part in (self.experts, self.router):
            if isinstance(part, MixturePart):
                part.hold(self.name)
        self.replicas = 1
        self.dispatch = None  # an ExpertParallelDispatch, made by `build` when expert-parallel
        # Each expert's slice has a data-dependent number of rows, which XLA cannot compile; this
        # makes Keras' jit_compile="auto" (XLA on a GPU) fall back to plain tf.function.
        self.supports_jit = False
        # Whether calls update the metrics below by default (a call's `track_metrics` decides).
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

    # the parts' variables, under the names the layer has always given them
    expert_kernel_in = _part_variable("experts", "expert_kernel_in")
    expert_bias_in = _part_variable("experts", "expert_bias_in")
    expert_kernel_out = _part_variable("experts", "expert_kernel_out")
    expert_bias_out = _part_variable("experts", "expert_bias_out")
    gate_kernel = _part_variable("router", "gate_kernel")
    noise_kernel = _part_variable("router", "noise_kernel")
    secondary_gate_kernel = _part_variable("router", "secondary_gate_kernel")
    secondary_noise_kernel = _part_variable("router", "secondary_noise_kernel")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        dim = input_shape[-1]
        if dim is None:
            raise ValueError(f"The last axis of the input must be known, got shape {input_shape}.")
        self.input_dim, self.output_dim = dim, self.output_units or dim
        for part in (self.experts, self.router):
            if not part.built:
                part.build((None, dim))
                part.built = True
        if self.expert_parallel:
            self.replicas = self.experts.replicas
            self.dispatch = ExpertParallelDispatch(ep.ExpertExchange(tf.distribute.get_strategy()), self.num_experts,
                                                   self.capacity_factor, self.experts_per_token, name=self.name)

    # ---- saving: the held parts' variables as the one list the layer has always written -------
    def _held_variables(self):
        parts = [p for p in (self.experts, self.router) if isinstance(p, MixturePart) and p.held]
        own = [own_variables(p) for p in parts]
        return [v for trainable, _ in own for v in trainable] + [v for _, fixed in own for v in fixed]

    def save_own_variables(self, store: MutableMapping[str, np.ndarray]) -> None:
        for i, v in enumerate(self._held_variables()):
            store[f"{i}"] = v

    def load_own_variables(self, store: Mapping[str, np.ndarray]) -> None:
        variables = self._held_variables()
        if len(store.keys()) != len(variables):
            raise ValueError(f"The weights file holds {len(store.keys())} variables for the mixture of experts "
                             f"{self.name!r}, which has {len(variables)} ({', '.join(v.name for v in variables)}); "
                             "was it saved from a layer of another configuration?")
        for i, v in enumerate(variables):
            v.assign(store[f"{i}"])

    # ---- the parts ---------------------------------------------------------------------
    def gate_kernels(self) -> GateKernels:
        """The router's weights (those the layer has: no noise kernels without noisy gating)."""
        return self.router.gate_kernels()

    def expert_weights(self) -> ExpertWeights:
        """The experts' weights (this replica's shard when expert-parallel), in the compute dtype;
        int8 kernels come with their scales (`quantize`)."""
        return self.experts.expert_weights()

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The experts' kernels as int8, each with a float32 scale per expert and output channel
        (`[E, h]` and `[E, o]`, `zoo.layers.int8`), applied to each row's product; the gate (whose
        top-k decides the routing) and the biases stay float32."""
        int8.check_mode(mode)
        if self.expert_parallel:
            raise ValueError(f"{self.name} is expert-parallel; quantize a one-device model (zoo.load the preset "
                             "it saved) instead.")
        if not hasattr(self.experts, "quantize"):
            raise ValueError(f"{self.name}: its experts layer {type(self.experts).__name__} has no quantize method; "
                             "int8 needs experts that quantize their own weights (FeedForwardExperts does).")
        self.experts.quantize(mode)

    def route(self, flat_x: tf.Tensor, training: bool = False,
              noise: tf.Tensor | tuple[tf.Tensor, tf.Tensor] | None = None) -> Routing:
        """Who goes where, for tokens `flat_x` <float>[n, d]: the router's call.

        Returns:
            The `Routing`: `token_ids`, `expert_ids`, `gates` (one entry per (token, expert)
            assignment), `importance` and `load` ([num_experts], equations 6 and 10, or 13 and
            14) and `counts` ([num_experts], tokens each expert receives).

        `noise` replaces the standard-normal draws of a training call: [n, num_experts] for a
        flat layer; for a grouped one a pair `([n, groups], [n, groups, experts_per_group])` of
        which only the groups each token is sent to are read.
        """
        flat_x = ops.cast(flat_x, self.compute_dtype)
        if noise is None:  # a router of one's own need not take noise
            return self.router(flat_x, training=training)
        return self.router(flat_x, training=training, noise=noise)

    def gates(self, x: tf.Tensor, training: bool = False,
              noise: tf.Tensor | tuple[tf.Tensor, tf.Tensor] | None = None) -> tf.Tensor:
        """The dense <float32>[tokens, num_experts] gate matrix (tokens = all leading positions of
        `x`), zero outside each token's experts; for testing and inspection, not for the forward
        pass."""
        if not self.built:
            self.build(tuple(x.shape))
        flat = ops.reshape(x, (-1, self.input_dim))
        return dense_gates(self.route(flat, training, noise), ops.shape(flat)[0], self.num_experts)

    def capacity(self, tokens_per_replica: int | tf.Tensor) -> tf.Tensor:
        """Assignments each (replica, expert) pair can receive in one exchange:
        ceil(capacity_factor · tokens per replica · experts per token / num_experts), an int32
        tensor (tokens per replica: the mean over the replicas, so that every replica agrees)."""
        return expert_capacity(self.capacity_factor, tokens_per_replica, self.experts_per_token, self.num_experts)

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
    def routing_recorded(self) -> Iterator[list[moe_statistics.RoutingRecord]]:
        """Within this block, every eager call of the layer appends the `RoutingRecord` of its
        batch (`zoo.layers.moe_statistics`: counts, Importance, Load, the router's entropy) to the
        list it yields; `moe_statistics.summarize` turns them into the balance statistics."""
        if not hasattr(self.router, "gate_distribution"):
            raise ValueError(f"{self.name}: recording the routing needs the router's full gate distribution; "
                             f"{type(self.router).__name__} has no gate_distribution(x) method.")
        records, previous = [], self._recorder
        self._recorder = _Recorder(records)
        try:
            yield records
        finally:
            self._recorder = previous

    # ---- the layer ---------------------------------------------------------------------
    def call(self, inputs: tf.Tensor, training: bool | None = None,
             noise: tf.Tensor | tuple[tf.Tensor, tf.Tensor] | None = None,
             track_metrics: bool | None = None) -> tf.Tensor:
        training = bool(training)
        track = self.track_metrics if track_metrics is None else bool(track_metrics)
        track = track and not balance_metrics_are_paused()
        flat = ops.reshape(inputs, (-1, self.input_dim))  # §3.1: every position is one token
        routing = self.route(flat, training, noise)
        if self._recorder is not None:
            distribution = self.router.gate_distribution(ops.cast(flat, self.compute_dtype))
            self._recorder.records.append(moe_statistics.record(routing, distribution))
        if self.expert_parallel:
            outputs, dropped = self.dispatch(flat, routing, self.expert_weights())
            if track:
                self.dropped_tracker.update_state(dropped)
        else:
            outputs = self.experts(ops.cast(flat, self.compute_dtype), routing)
        self._balance(routing, training, track)
        return ops.reshape(outputs, tuple(ops.shape(inputs)[:-1]) + (self.output_dim,))

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.output_units or input_shape[-1],)

    def get_config(self) -> dict[str, Any]:
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
        for name, given in self._given_parts.items():  # the default parts follow from the above
            if given:
                config[name] = keras.saving.serialize_keras_object(getattr(self, name))
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SparseMoE:
        config = dict(config)
        for name in ("router", "experts"):
            if config.get(name) is not None:
                config[name] = keras.saving.deserialize_keras_object(config[name])
        return super().from_config(config)
