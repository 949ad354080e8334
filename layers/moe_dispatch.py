"""Dispatch and combine of the sparsely-gated mixture of experts (Shazeer et al. 2017): every
(token, expert) assignment of a `Routing` goes to its expert, the experts run, and the
gate-weighted outputs are summed back into their tokens, `y = Σ_i G(x)_i · E_i(x)` (equation 1)
over each token's own experts only.

Each expert is `E_i(x) = ReLU(x·W1_i + b1_i)·W2_i + b2_i` (the experts of §3.2 and Appendix C),
its weights slices of the stacked `ExpertWeights`.

- `dispatch_local`: all experts on this device. The assignments are sorted by expert and each
  expert runs one matmul pair on just its own rows (`segment_ops.segment_matmul`): the expert
  work is `k · tokens · (d·h + h·o)` multiply-adds whatever the number of experts, no
  `[tokens, experts, hidden]` tensor is built and no expert's rows are padded (§3.1).
- `ExpertParallelDispatch`: the experts sharded over the R replicas of a `tf.distribute`
  strategy (`zoo.layers.expert_parallel`), tokens sent to the replica holding their expert in
  fixed-size blocks (`capacity`) and their outputs sent back.
"""

from typing import NamedTuple, Optional

import tensorflow as tf
from keras import ops

from zoo.layers.moe_router import Routing, sum_over_replicas
from zoo.layers.segment_ops import segment_matmul, sort_by


def mark_expert_matrix(variable):
    """Marks `variable` as a stack of the experts' weight matrices ([E, rows, cols]): what the
    factorised Adam of Appendix D factors (`is_expert_matrix`), whatever the layer's name."""
    variable.expert_matrix = True
    return variable


def is_expert_matrix(variable) -> bool:
    """Whether a layer marked `variable` as its experts' weight matrices (`mark_expert_matrix`)."""
    return bool(getattr(variable, "expert_matrix", False))


class ExpertWeights(NamedTuple):
    """The stacked weights of E feed-forward experts (d: input width, h: hidden, o: output);
    every expert matrix is a 2-D slice (for the factorised optimiser of Appendix D).

    Fields:
        kernel_in: <float>[E, d, h], `W1` (int8 values as floats when quantized).
        bias_in: <float>[E, h], `b1`.
        kernel_out: <float>[E, h, o], `W2` (idem).
        bias_out: <float>[E, o], `b2`.
        scale_in: None, or <float>[E, h]: `W1 = kernel_in · scale_in` per expert and output
            channel (an int8 layer, `zoo.layers.int8`), applied to each row's product.
        scale_out: None, or <float>[E, o], the same for `W2`.
    """

    kernel_in: tf.Tensor
    bias_in: tf.Tensor
    kernel_out: tf.Tensor
    bias_out: tf.Tensor
    scale_in: Optional[tf.Tensor] = None
    scale_out: Optional[tf.Tensor] = None

    def cast(self, dtype) -> "ExpertWeights":
        """The weights cast to `dtype` (a layer's compute dtype)."""
        return ExpertWeights(*(None if w is None else ops.cast(w, dtype) for w in self))


def dispatch_local(flat_x: tf.Tensor, routing: Routing, experts: ExpertWeights) -> tf.Tensor:
    """`Σ_i G(x)_i E_i(x)` over each token's own experts, all experts on this device: the
    assignments are sorted by expert, each expert runs on its slice of rows, the gate-weighted
    results go back to their tokens (`unsorted_segment_sum`).

    Args:
        flat_x: <float>[n, d], the tokens, in the dtype of `experts`.
        routing: the `Routing` of `flat_x` (its `token_ids`, `expert_ids` and `gates` are read).
        experts: the weights of the E experts.

    Returns:
        <float>[n, o]; a token's row is zero if it has no assignment.

    Example:

    >>> experts = ExpertWeights(tf.ones((2, 3, 4)), tf.zeros((2, 4)), tf.ones((2, 4, 5)), tf.zeros((2, 5)))
    >>> routing = {"token_ids": tf.constant([0, 0, 1]), "expert_ids": tf.constant([0, 1, 1]),
    ...            "gates": tf.constant([0.25, 0.75, 1.0])}
    >>> dispatch_local(tf.ones((2, 3)), routing, experts).numpy().tolist()
    [[12.0, 12.0, 12.0, 12.0, 12.0], [12.0, 12.0, 12.0, 12.0, 12.0]]
    """
    order, sizes = sort_by(routing["expert_ids"], experts.kernel_in.shape[0])
    token_ids, expert_ids, gates = (
        tf.gather(routing[key], order) for key in ("token_ids", "expert_ids", "gates")
    )
    rows = tf.gather(flat_x, token_ids)  # k rows per token, expert by expert
    hidden = _scaled(segment_matmul(rows, sizes, experts.kernel_in), experts.scale_in, expert_ids)
    hidden = ops.relu(hidden + tf.gather(experts.bias_in, expert_ids))
    outputs = _scaled(segment_matmul(hidden, sizes, experts.kernel_out), experts.scale_out, expert_ids)
    outputs = outputs + tf.gather(experts.bias_out, expert_ids)
    weighted = outputs * ops.cast(gates, experts.kernel_in.dtype)[:, None]
    return tf.math.unsorted_segment_sum(weighted, token_ids, ops.shape(flat_x)[0])


def _scaled(products, scale, expert_ids):
    """Each row's product times its expert's scale per output channel (int8 experts), or as it is."""
    return products if scale is None else products * tf.gather(scale, expert_ids)


def expert_capacity(capacity_factor: float, tokens_per_replica, experts_per_token: int,
                    num_experts: int) -> tf.Tensor:
    """Assignments each (replica, expert) pair can receive in one exchange:
    ceil(capacity_factor · tokens per replica · experts per token / num_experts), an <int32>[]
    tensor.

    Example:

    >>> int(expert_capacity(2.0, 10, 2, 8))
    5
    """
    tokens = tf.cast(tokens_per_replica, tf.float64)
    return tf.cast(tf.math.ceil(capacity_factor * tokens * experts_per_token / num_experts), tf.int32)


class ExpertParallelDispatch:
    """`dispatch_local` with the experts sharded over R replicas (replica r holds experts
    [r·E/R, (r+1)·E/R)): each assignment goes to the replica holding its expert, in a slot of a
    fixed-size [R, E/R, capacity] exchange; every replica runs its own experts on what it
    received; the outputs come back by the reverse exchange. It runs inside `strategy.run`.

    Over capacity: an expert takes a replica's assignments in token order up to `capacity`; the
    rest are dropped (and counted) and the token's remaining gates are renormalised to the sum its
    gates had, so its output stays a convex combination of the experts it did reach, as with the
    top-k softmax; a token that reaches none of its experts gets zeros (through a residual
    connection it passes unchanged). With enough capacity nothing is dropped and the output is
    `dispatch_local`'s.

    Args:
        exchange: the all-to-all of the R replicas (`expert_parallel.ExpertExchange`, or any
            object with `replicas` and `exchange(t)`, which sends row block r of `t` to replica r).
        num_experts: E, divisible by R.
        capacity_factor: the factor of `expert_capacity`.
        experts_per_token: assignments per token (k, or k_primary · k_secondary).
        name: the layer's name, for the error message.

    Example (one replica, whose exchange gives back what it is sent):

    >>> class Loopback:
    ...     replicas = 1
    ...     def exchange(self, t):
    ...         return t
    >>> dispatch = ExpertParallelDispatch(Loopback(), num_experts=2, capacity_factor=1.0, experts_per_token=1)
    >>> experts = ExpertWeights(tf.ones((2, 3, 4)), tf.zeros((2, 4)), tf.ones((2, 4, 5)), tf.zeros((2, 5)))
    >>> routing = {"token_ids": tf.constant([0, 1]), "expert_ids": tf.constant([1, 1]),
    ...            "gates": tf.constant([1.0, 1.0])}
    >>> outputs, dropped = dispatch(tf.ones((2, 3)), routing, experts)
    >>> outputs.numpy()[:, 0].tolist(), float(dropped)  # capacity 1: token 1 is dropped
    ([12.0, 0.0], 1.0)
    """

    def __init__(self, exchange, num_experts: int, capacity_factor: float, experts_per_token: int,
                 name: str = "sparse_moe"):
        self.exchange = exchange
        self.replicas = exchange.replicas
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.experts_per_token = experts_per_token
        self.name = name

    def capacity(self, tokens_per_replica) -> tf.Tensor:
        """`expert_capacity` of this dispatch, <int32>[]."""
        return expert_capacity(self.capacity_factor, tokens_per_replica, self.experts_per_token, self.num_experts)

    def __call__(self, flat_x: tf.Tensor, routing: Routing, experts: ExpertWeights) -> tuple[tf.Tensor, tf.Tensor]:
        """The experts' gate-weighted outputs for this replica's tokens.

        Args:
            flat_x: <float>[n, d], this replica's tokens, in the dtype of `experts`.
            routing: their `Routing`.
            experts: this replica's E/R experts.

        Returns:
            `(outputs, dropped)`: <float>[n, o], and the <float32>[] number of this replica's
            assignments dropped over capacity.
        """
        if tf.distribute.in_cross_replica_context() or tf.distribute.get_replica_context() is None:
            raise ValueError(f"{self.name}: an expert-parallel SparseMoE runs inside strategy.run of the strategy "
                             "it was built under.")
        n = tf.shape(flat_x)[0]
        # one capacity for every replica (the exchanged blocks must have one shape): from the
        # mean number of tokens per replica
        (total,) = sum_over_replicas(tf.cast(n, tf.float32))
        capacity = self.capacity(total / self.replicas)
        expert_ids, token_ids = routing["expert_ids"], routing["token_ids"]
        slot, kept = self._slots(expert_ids, capacity)
        dropped = tf.reduce_sum(tf.cast(~kept, tf.float32))
        gates = _renormalised(routing["gates"], token_ids, kept, n)
        local = self.num_experts // self.replicas
        index = tf.boolean_mask(tf.stack([expert_ids // local, expert_ids % local, slot], axis=1), kept)
        token_kept = tf.boolean_mask(token_ids, kept)
        gates_kept = tf.boolean_mask(gates, kept)
        outputs = self._exchange_and_run(tf.gather(flat_x, token_kept), index, capacity, experts)
        weighted = outputs * ops.cast(gates_kept, experts.kernel_in.dtype)[:, None]
        return tf.math.unsorted_segment_sum(weighted, token_kept, n), dropped

    def _slots(self, expert_ids, capacity):
        """Each assignment's place in its expert's queue (in token order), and whether it is
        below `capacity`."""
        order, sizes = sort_by(expert_ids, self.num_experts)
        sorted_experts = tf.gather(expert_ids, order)
        starts = tf.cumsum(sizes, exclusive=True)
        slot_sorted = tf.range(tf.size(expert_ids)) - tf.gather(starts, sorted_experts)
        slot = tf.scatter_nd(order[:, None], slot_sorted, tf.shape(expert_ids))
        return slot, slot < capacity

    def _exchange_and_run(self, rows, index, capacity, experts):
        """Sends `rows` to their (replica, expert, slot) `index`, runs this replica's experts on
        what it receives, and returns each row's output from where it was sent."""
        replicas, local = self.replicas, self.num_experts // self.replicas
        dim, out = rows.shape[-1], experts.kernel_out.shape[-1]
        send = tf.scatter_nd(index, rows, tf.stack([replicas, local, capacity, dim]))
        received = self.exchange.exchange(tf.reshape(send, [replicas, -1]))
        per_expert = tf.reshape(tf.transpose(tf.reshape(received, [replicas, local, capacity, dim]), [1, 0, 2, 3]),
                                [local, replicas * capacity, dim])
        hidden = ops.relu(tf.matmul(per_expert, experts.kernel_in) + experts.bias_in[:, None, :])
        outputs = tf.matmul(hidden, experts.kernel_out) + experts.bias_out[:, None, :]  # [local, R·capacity, out]
        back = tf.transpose(tf.reshape(outputs, [local, replicas, capacity, out]), [1, 0, 2, 3])
        returned = tf.reshape(self.exchange.exchange(tf.reshape(back, [replicas, -1])),
                              [replicas, local, capacity, out])
        return tf.gather_nd(returned, index)


def _renormalised(gates, token_ids, kept, n):
    """Each token's kept gates scaled to the sum of all its gates (1 for the top-k softmax);
    dropped assignments get 0."""
    all_sum = tf.math.unsorted_segment_sum(gates, token_ids, n)
    kept_gates = tf.where(kept, gates, tf.zeros_like(gates))
    kept_sum = tf.math.unsorted_segment_sum(kept_gates, token_ids, n)
    scale = tf.math.divide_no_nan(all_sum, kept_sum)
    return kept_gates * tf.gather(scale, token_ids)
