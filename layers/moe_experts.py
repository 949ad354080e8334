"""The experts of the sparsely-gated mixture of experts (Shazeer et al. 2017): E feed-forward
networks `E_i(x) = ReLU(x·W1_i + b1_i)·W2_i + b2_i` (§3.2 and Appendix C) as one Keras layer that
owns their stacked weights, the experts part of `zoo.layers.SparseMoE`."""

from __future__ import annotations

import math
from typing import Any, Optional

import keras
import tensorflow as tf

from zoo.layers import expert_parallel as ep
from zoo.layers import int8
from zoo.layers.moe_dispatch import ExpertWeights, dispatch_local, mark_expert_matrix
from zoo.layers.moe_parts import MixturePart
from zoo.layers.moe_router import Routing, check_positive_int

EXPERT_VARIABLES = ("expert_kernel_in", "expert_bias_in", "expert_kernel_out", "expert_bias_out")


def glorot_limit(fan_in: int, fan_out: int) -> float:
    """The Glorot-uniform limit of one expert's own 2-D matrix: Keras would compute the fans of
    the stacked [E, a, b] tensor as E·a and E·b."""
    return math.sqrt(6.0 / (fan_in + fan_out))


class FeedForwardExperts(MixturePart, keras.layers.Layer):
    """E feed-forward experts d → h (ReLU) → o, their weights stacked.

    Variables: `expert_kernel_in` [E, d, h] and `expert_kernel_out` [E, h, o] (each expert's
    matrix a 2-D slice, Glorot-uniform on its own fans, marked `moe_dispatch.mark_expert_matrix`
    so that the factorised Adam of Appendix D factors them whatever the layer is called),
    `expert_bias_in` [E, h] and `expert_bias_out` [E, o] (zeros).

    Called on tokens <float>[n, d] and a `Routing`, it runs each assignment through its expert
    and returns the gate-weighted sums <float>[n, o] (`moe_dispatch.dispatch_local`: each expert
    on just its own rows). `expert_weights()` gives the weights to a dispatch of another kind
    (the expert-parallel one of `SparseMoE`).

    Args:
        num_experts: E.
        hidden_units: h.
        output_units: o (the input width by default).
        expert_parallel: shard the experts over the replicas of the `tf.distribute` strategy in
            scope at build: each replica holds E/R of them, per-replica variables
            (`zoo.layers.expert_parallel`). Placement, not architecture: not in the config.

    Example:

    >>> from zoo.layers.moe_router import NoisyTopKRouter
    >>> x = keras.ops.ones((3, 8))
    >>> experts = FeedForwardExperts(num_experts=4, hidden_units=16)
    >>> tuple(experts(x, NoisyTopKRouter(num_experts=4, k=2)(x)).shape)
    (3, 8)
    """

    def __init__(self, num_experts: int, hidden_units: int, output_units: Optional[int] = None,
                 expert_parallel: bool = False, **kwargs):
        check_positive_int("num_experts", num_experts)
        check_positive_int("hidden_units", hidden_units)
        if output_units is not None:
            check_positive_int("output_units", output_units)
        super().__init__(**kwargs)
        self.num_experts = num_experts
        self.hidden_units = hidden_units
        self.output_units = output_units
        self.expert_parallel = bool(expert_parallel)
        self.replicas = 1

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        dim = input_shape[-1]
        hidden, out = self.hidden_units, self.output_units or dim
        if self.expert_parallel:
            self._build_shards(dim, hidden, out)
            return

        def glorot(fan_in, fan_out):
            limit = glorot_limit(fan_in, fan_out)
            return keras.initializers.RandomUniform(-limit, limit)

        experts = self.num_experts
        self.expert_kernel_in = self.add_weight(
            name="expert_kernel_in", shape=(experts, dim, hidden), initializer=glorot(dim, hidden))
        self.expert_bias_in = self.add_weight(name="expert_bias_in", shape=(experts, hidden), initializer="zeros")
        self.expert_kernel_out = self.add_weight(
            name="expert_kernel_out", shape=(experts, hidden, out), initializer=glorot(hidden, out))
        self.expert_bias_out = self.add_weight(name="expert_bias_out", shape=(experts, out), initializer="zeros")
        for kernel in (self.expert_kernel_in, self.expert_kernel_out):
            mark_expert_matrix(kernel)

    def _build_shards(self, dim, hidden, out):
        """This replica's E/R experts, one per-replica (sync-on-read) variable each, initialised
        per replica."""
        strategy = tf.distribute.get_strategy()
        self.replicas = ep.check_strategy(strategy, self.num_experts, self.display_name)
        local = self.num_experts // self.replicas
        specs = [("expert_kernel_in", (local, dim, hidden), glorot_limit(dim, hidden)),
                 ("expert_bias_in", (local, hidden), 0.0),
                 ("expert_kernel_out", (local, hidden, out), glorot_limit(hidden, out)),
                 ("expert_bias_out", (local, out), 0.0)]
        created = []
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

    def expert_weights(self) -> ExpertWeights:
        """The experts' weights (this replica's shard when expert-parallel) in the compute dtype;
        int8 kernels come with their scales (`quantize`)."""
        kernel_in, scale_in = int8.quantized_and_scale(self, self.expert_kernel_in, self.compute_dtype)
        kernel_out, scale_out = int8.quantized_and_scale(self, self.expert_kernel_out, self.compute_dtype)
        return ExpertWeights(kernel_in, self.expert_bias_in, kernel_out, self.expert_bias_out, scale_in,
                             scale_out).cast(self.compute_dtype)

    def quantize(self, mode: str = "int8", **kwargs) -> None:
        """The kernels as int8, each with a float32 scale per expert and output channel (`[E, h]`
        and `[E, o]`, `zoo.layers.int8`), applied to each row's product; the biases stay float32."""
        int8.check_mode(mode)
        int8.check_not_quantized(self)
        self.expert_kernel_in = int8.replace(self, self.expert_kernel_in, axis=(0, -1))
        self.expert_kernel_out = int8.replace(self, self.expert_kernel_out, axis=(0, -1))

    def call(self, x: tf.Tensor, routing: Routing) -> tf.Tensor:
        return dispatch_local(x, routing, self.expert_weights())

    def compute_output_shape(self, input_shape: tuple[int | None, ...],
                             routing_shape: dict[str, tuple[int | None, ...]] | None = None
                             ) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.output_units or input_shape[-1],)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"num_experts": self.num_experts, "hidden_units": self.hidden_units,
                       "output_units": self.output_units})
        return config
