"""The sparsely-gated mixture-of-experts layer of Shazeer et al. (2017).

`y = Σ_i G(x)_i · E_i(x)` (equation 1) with the noisy top-k gate of equations 3–5, the
importance and load losses of §4 and Appendix A (equations 6–11), and optionally the two-level
hierarchical mixture of Appendix B (equations 12–14). Only the k experts a token is sent to are
evaluated on it.

Dispatch (see `SparseMoE` and `segment_matmul`): the (token, expert) assignments are sorted by
expert and every expert multiplies its own contiguous slice of rows, so the expert work per token
is k expert evaluations whatever the number of experts (§3.1: capacity grows, computation per
token does not). What does grow with E is memory traffic: every step reads all E expert kernels
and writes their full gradients once, with fewer rows per expert to amortise each kernel over
(§3.1's "shrinking batch problem"). The kernel-gradient write is kept to that one write, and the
row gradient is arranged so that small per-expert batches do not re-pack each kernel transposed.
"""

import contextlib
import math
import threading

import keras
import tensorflow as tf
from keras import ops

from zoo.layers import expert_parallel as ep
from zoo.layers.softmax import softmax_dtype
from zoo.layers.validation import check_int, check_number, is_int

# Keeps CV² finite when every value is 0 (e.g. an empty batch); far below any real mean².
CV_EPSILON = 1e-10

_metrics_pause = threading.local()  # .depth: how many `balance_metrics_paused` blocks are open


@contextlib.contextmanager
def balance_metrics_paused():
    """Within this block (in this thread), no `SparseMoE` call updates its balance metrics,
    whatever its `track_metrics`: for tracing a stateless graph, such as a SavedModel's serving
    signatures (`zoo.export.signatures.serving_trace`), without metric variables or their updates.
    The losses are unaffected."""
    _metrics_pause.depth = getattr(_metrics_pause, "depth", 0) + 1
    try:
        yield
    finally:
        _metrics_pause.depth -= 1


def balance_metrics_are_paused():
    return getattr(_metrics_pause, "depth", 0) > 0


def cv_squared(values):
    """Squared coefficient of variation of a vector: population variance / mean².

    The population variance (divide by the number of values, not by one less) is used, as in
    the authors' own code; `CV_EPSILON` in the denominator keeps an all-zero vector at 0.
    """
    values = ops.convert_to_tensor(values)
    mean = ops.mean(values)
    variance = ops.mean(ops.square(values - mean))
    return variance / (ops.square(mean) + CV_EPSILON)


def sum_over_replicas(*values):
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


def normal_cdf(z):
    """Φ, the CDF of the standard normal distribution (equation 9)."""
    return 0.5 * (1.0 + ops.erf(z / math.sqrt(2.0)))


def check_positive_int(name, value):
    return check_int(name, value, minimum=1)


def check_k(k, num_experts, groups):
    """`k` as a pair `(k_primary, k_secondary)`; for a flat layer k_primary is the only one."""
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


def check_weight(name, value):
    return check_number(name, value, minimum=0)


def sort_by(ids, num_segments):
    """The stable order that sorts `ids`, and how many ids fall in each of the segments."""
    order = tf.argsort(ids, stable=True)
    sizes = tf.math.unsorted_segment_sum(tf.ones_like(ids), ids, num_segments)
    return order, sizes


def segment_matmul(rows, sizes, kernels):
    """`rows` sorted by segment, `sizes[s]` rows in segment s: each segment's rows times its own
    `kernels[s]`, one matmul per segment. rows: [n, a]; kernels: [S, a, b] -> [n, b].

    The gradient is written by hand (see `_segment_matmul_grad`); it is the same arithmetic as
    TensorFlow's own, arranged for small segments."""
    num_segments = kernels.shape[0]

    @tf.custom_gradient
    def forward(rows, kernels):
        parts = tf.split(rows, sizes, num=num_segments)
        # unstack once (dim-0 slices share the stacked buffer: no copy); slicing the stacked
        # tensor S times would give S full-size gradients.
        slices = tf.unstack(kernels, num=num_segments)
        outputs = tf.concat([tf.matmul(part, kernel) for part, kernel in zip(parts, slices)], 0)

        def grad(upstream):
            return _segment_matmul_grad(rows, parts, slices, sizes, upstream)

        return outputs, grad

    return forward(rows, tf.convert_to_tensor(kernels))


# Below this many rows per segment on average, the row gradient of `segment_matmul` is computed
# as (kernel · upstreamᵀ)ᵀ rather than upstream · kernelᵀ (see `_segment_matmul_grad`).
SMALL_SEGMENT_ROWS = 512


def _segment_matmul_grad(rows, parts, slices, sizes, upstream):
    """Gradients of `segment_matmul` w.r.t. rows and kernels.

    Kernel gradient: `part_sᵀ · upstream_s` per segment, stacked once into the [S, a, b]
    gradient (the one unavoidable write of all S kernels). Row gradient: `upstream_s · kernel_sᵀ`
    per segment, which is what `tf.matmul`'s gradient does; with a transposed right operand the
    CPU (Eigen) contraction re-packs the whole kernel in transposed order for every call, which
    costs as much as the multiplication itself when a segment has few rows (many experts, §3.1's
    shrinking batch). For small segments it is computed as `(kernel_s · upstream_sᵀ)ᵀ` instead,
    reading each kernel in its stored order, and for large ones as usual; the choice follows the
    mean segment size of the step (`SMALL_SEGMENT_ROWS`; the measurements are in
    docs/benchmarks.md, `zoo benchmark moe`).
    """
    num_segments = len(slices)
    ups = tf.split(upstream, sizes, num=num_segments)
    kernel_grads = tf.stack(
        [tf.matmul(part, up, transpose_a=True) for part, up in zip(parts, ups)]
    )

    def large_segments():
        return tf.concat([tf.matmul(up, kernel, transpose_b=True) for up, kernel in zip(ups, slices)], 0)

    def small_segments():
        return tf.concat(
            [tf.transpose(tf.matmul(kernel, up, transpose_b=True)) for up, kernel in zip(ups, slices)], 0
        )

    small = tf.shape(rows)[0] < SMALL_SEGMENT_ROWS * num_segments
    return tf.cond(small, small_segments, large_segments), kernel_grads


@keras.saving.register_keras_serializable(package="layers")
class SparseMoE(keras.layers.Layer):
    """A sparsely-gated mixture of feed-forward experts (Shazeer et al., 2017).

    Each expert is `E_i(x) = ReLU(x·W1_i + b1_i)·W2_i + b2_i` (the experts of §3.2 and Appendix
    C). The gate is the noisy top-k gate of equations 3–5:
    `H(x) = x·W_g + StandardNormal()·(Softplus(x·W_noise) + noise_epsilon)`, keep the k largest
    entries of `H(x)`, softmax over those k. `W_g` and `W_noise` start at zero (Appendix A), so
    every expert starts with the same expected load. Input of any rank is flattened to one batch
    of tokens (§3.1: all positions of all sequences are gated together), and the output takes back
    the input's leading shape.

    Sparse dispatch: the k (token, expert) assignments of every token are sorted by expert, each
    expert runs one matmul pair on just its own rows (`segment_matmul`, whose gradient is written
    for small per-expert batches), and the gate-weighted results are summed back into their
    tokens with `unsorted_segment_sum`. The expert work is `k · tokens · (d·h + h·o)`
    multiply-adds, whatever the number of experts; no `[tokens, experts, hidden]` tensor is built
    and no expert's rows are padded. This keeps §3.1's promise, computation per token independent
    of E, in the forward and the backward pass; what still grows with E is the one write of the
    kernel gradient ([E, d, h]), which grows with the parameters themselves. The gate costs
    `tokens · d · num_experts` (flat) or `tokens · d · (groups + k_primary · num_experts /
    groups)` (hierarchical).

    Losses (training only, through `add_loss`): `importance_weight · CV(Importance)²` (equations
    6–7) and `load_weight · CV(Load)²` (equation 11), CV² being the population variance over the
    squared mean (`cv_squared`). Load is the smooth estimator of equations 8–10 when the gate is
    noisy, otherwise (noisy_gating=False, or k equal to the number of experts it chooses from) the
    hard count of tokens per expert. A weight of 0 adds no loss at all.

    Hierarchical mixture (`groups=G`, Appendix B): a primary noisy top-k gate over G groups, and in
    each group a secondary noisy top-k gate over its `num_experts / G` experts, evaluated only on
    the tokens the primary gate sends there (`X^(i)`). `y_H = Σ_i Σ_j G_primary(x)_i · G_i(x)_j ·
    E_ij(x)` (equation 12); Importance_H and Load_H follow equations 13 and 14 and replace the
    flat ones in the losses. `k` is either one integer used at both levels (the paper's machine
    translation models use k=2 at each level, Appendix E) or a pair `(k_primary, k_secondary)`;
    each token then reaches `k_primary · k_secondary` experts. Expert `(i, j)` is expert
    `i · num_experts / G + j` of the stacked weights.

    Where the text leaves a choice, the authors' tensor2tensor code (`expert_utils.py`) is
    followed: the noise is drawn in training only (inference is deterministic), `noise_epsilon`
    is added to the noise standard deviation so that the normal CDF of equation 9 never divides
    by zero, and `kth_excluding(H(x), k, i)` is the (k+1)-th largest entry of `H(x)` when expert i
    is among the top k and the k-th largest otherwise. Ties (as with the all-zero initial `W_g`
    at inference) go to the lower expert index.

    Metrics, averaged over the batches of an epoch as in Table 6 and shown in `fit` logs with
    the layer's name as prefix: `<name>_cv_importance` (CV, not squared, of Importance),
    `<name>_cv_load` and `<name>_max_load_ratio` (CV and max/mean of the number of tokens each
    expert actually receives). They are `keras.metrics.Mean` attributes of the layer; Keras 3
    collects the metrics of every sub-layer into the model's, so a plain `model.fit` logs them.

    The per-expert slices have data-dependent sizes, so the layer sets `supports_jit = False`:
    a model holding it runs its steps as a `tf.function` without XLA.

    Expert variables are named `expert_kernel_in` [E, d, h], `expert_bias_in` [E, h],
    `expert_kernel_out` [E, h, o], `expert_bias_out` [E, o] (every expert matrix is a 2-D slice,
    for the factorised optimiser of Appendix D); gate variables are `gate_kernel` (`W_g`, the
    primary gate when grouped), `noise_kernel` (`W_noise`), `secondary_gate_kernel` and
    `secondary_noise_kernel` ([G, d, E/G]).

    Methods: `gates(x, training=False, noise=None)` is the dense `[tokens, num_experts]` matrix of
    gate values (zero outside each token's experts); `route(flat_x, training, noise)` gives the
    sparse assignments with Importance, Load and the hard counts.

    Args:
        num_experts: number of experts E.
        k: experts per token; an integer in [1, E], or with `groups` an integer or a pair
            `(k_primary, k_secondary)`.
        hidden_units: width h of each expert's ReLU layer.
        output_units: output width o (the input width by default).
        importance_weight: `w_importance` of equation 7 (the paper's 0.1).
        load_weight: `w_load` of equation 11 (the paper's 0.1).
        groups: None for a flat mixture, or the number of groups of a hierarchical one; must
            divide `num_experts`.
        noisy_gating: add the trainable Gaussian noise of equation 4 while training.
        noise_epsilon: added to `Softplus(x·W_noise)`, the noise standard deviation.
        expert_parallel: shard the experts over the replicas of the `tf.distribute` strategy in
            scope when the layer is built (`zoo.layers.expert_parallel`): replica r holds experts
            [r·E/R, (r+1)·E/R) as per-replica variables and tokens move by all-to-all; the layer
            then runs only inside that strategy's `strategy.run`. None (the default) follows an
            open `expert_parallelism()` block. Not part of the config: placement, not
            architecture.
        capacity_factor: with `expert_parallel`, each (replica, expert) pair takes at most
            ceil(capacity_factor · tokens per replica · experts per token / num_experts)
            assignments a call (`capacity`); the rest are dropped and counted in the metric
            `<name>_dropped` (see `_experts_parallel`). Default 2.0.
    """

    def __init__(
        self,
        num_experts,
        k,
        hidden_units,
        output_units=None,
        importance_weight=0.1,
        load_weight=0.1,
        groups=None,
        noisy_gating=True,
        noise_epsilon=1e-2,
        expert_parallel=None,
        capacity_factor=None,
        **kwargs,
    ):
        if kwargs.get("name") is None:
            # Keras would derive "sparse_mo_e" from the class name; the metrics carry this name.
            uid = keras.backend.get_uid("sparse_moe")
            kwargs["name"] = "sparse_moe" if uid == 1 else f"sparse_moe_{uid - 1}"
        super().__init__(**kwargs)
        check_positive_int("num_experts", num_experts)
        check_positive_int("hidden_units", hidden_units)
        if output_units is not None:
            check_positive_int("output_units", output_units)
        if groups is not None:
            check_positive_int("groups", groups)
            if num_experts % groups:
                raise ValueError(
                    f"groups must divide num_experts: {num_experts} experts cannot be split "
                    f"into groups={groups} equal groups."
                )
        self.k_primary, self.k_secondary = check_k(k, num_experts, groups)
        check_weight("importance_weight", importance_weight)
        check_weight("load_weight", load_weight)
        check_weight("noise_epsilon", noise_epsilon)
        if not isinstance(noisy_gating, bool):
            raise ValueError(f"noisy_gating must be True or False, got {noisy_gating!r}.")
        self.num_experts = num_experts
        self.k = list(k) if isinstance(k, (list, tuple)) else k
        self.hidden_units = hidden_units
        self.output_units = output_units
        self.importance_weight = importance_weight
        self.load_weight = load_weight
        self.groups = groups
        self.noisy_gating = noisy_gating
        self.noise_epsilon = noise_epsilon
        # Expert parallelism (`zoo.layers.expert_parallel`): placement, not architecture, so not
        # part of the config. None follows an open `expert_parallelism()` block.
        scoped = ep.scoped_capacity_factor()
        if expert_parallel is None:
            expert_parallel = scoped is not None
        if not isinstance(expert_parallel, bool):
            raise ValueError(f"expert_parallel must be True, False or None, got {expert_parallel!r}.")
        if capacity_factor is None:
            capacity_factor = scoped if scoped is not None else ep.DEFAULT_CAPACITY_FACTOR
        self.expert_parallel = expert_parallel
        self.capacity_factor = ep.check_capacity_factor(capacity_factor)
        self.replicas = 1
        self.seed_generator = keras.random.SeedGenerator()
        # Each expert's slice has a data-dependent number of rows, which XLA cannot compile; this
        # makes Keras' jit_compile="auto" (XLA on a GPU) fall back to plain tf.function.
        self.supports_jit = False
        # Whether calls update the metrics below (also off, for every MoE layer, inside
        # `balance_metrics_paused()`, which the SavedModel export traces its signatures in).
        self.track_metrics = True
        # Named after the layer so that two MoE layers of one model log separately.
        self.cv_importance_tracker = keras.metrics.Mean(name=f"{self.name}_cv_importance")
        self.cv_load_tracker = keras.metrics.Mean(name=f"{self.name}_cv_load")
        self.max_load_ratio_tracker = keras.metrics.Mean(name=f"{self.name}_max_load_ratio")
        if expert_parallel:
            # (token, expert) assignments over capacity, summed over the replicas and the steps
            self.dropped_tracker = keras.metrics.Sum(name=f"{self.name}_dropped")

    @property
    def experts_per_group(self):
        return self.num_experts // (self.groups or 1)

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None:
            raise ValueError(f"The last axis of the input must be known, got shape {input_shape}.")
        out = self.output_units or dim
        experts, hidden = self.num_experts, self.hidden_units
        self.input_dim, self.output_dim = dim, out

        def glorot(fan_in, fan_out):
            # Glorot-uniform limits of one expert's own 2-D matrix: Keras would compute the fans
            # of the stacked [E, a, b] tensor as E·a and E·b.
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            return keras.initializers.RandomUniform(-limit, limit)

        if self.expert_parallel:
            self._build_expert_shards(dim, hidden, out)
        else:
            self.expert_kernel_in = self.add_weight(
                name="expert_kernel_in", shape=(experts, dim, hidden), initializer=glorot(dim, hidden)
            )
            self.expert_bias_in = self.add_weight(
                name="expert_bias_in", shape=(experts, hidden), initializer="zeros"
            )
            self.expert_kernel_out = self.add_weight(
                name="expert_kernel_out", shape=(experts, hidden, out), initializer=glorot(hidden, out)
            )
            self.expert_bias_out = self.add_weight(
                name="expert_bias_out", shape=(experts, out), initializer="zeros"
            )
        # Appendix A: zero gate and noise weights, "no signal and some noise", balanced loads.
        shape = (dim, self.groups or experts)
        self.gate_kernel = self.add_weight(name="gate_kernel", shape=shape, initializer="zeros")
        if self.noisy_gating:
            self.noise_kernel = self.add_weight(name="noise_kernel", shape=shape, initializer="zeros")
        if self.groups:
            shape = (self.groups, dim, self.experts_per_group)
            self.secondary_gate_kernel = self.add_weight(
                name="secondary_gate_kernel", shape=shape, initializer="zeros"
            )
            if self.noisy_gating:
                self.secondary_noise_kernel = self.add_weight(
                    name="secondary_noise_kernel", shape=shape, initializer="zeros"
                )

    def _build_expert_shards(self, dim, hidden, out):
        """The expert variables of an expert-parallel layer: this replica's E/R experts, one
        per-replica (sync-on-read) variable each, initialised per replica, and the exchange."""
        strategy = tf.distribute.get_strategy()
        self.replicas = ep.check_strategy(strategy, self.num_experts, self.name)
        local = self.num_experts // self.replicas
        specs = [("expert_kernel_in", (local, dim, hidden), math.sqrt(6.0 / (dim + hidden))),
                 ("expert_bias_in", (local, hidden), 0.0),
                 ("expert_kernel_out", (local, hidden, out), math.sqrt(6.0 / (hidden + out))),
                 ("expert_bias_out", (local, out), 0.0)]
        created = []
        with keras.name_scope(self.name, caller=self):
            for name, shape, limit in specs:
                variable = keras.Variable(
                    initializer="zeros", shape=shape, dtype=self.variable_dtype, name=name,
                    synchronization="on_read", aggregation="only_first_replica")
                variable.expert_shard = True
                setattr(self, name, variable)  # tracked by the layer, trainable
                created.append((variable, limit))
        seed = int(tf.random.uniform([], maxval=2**30, dtype=tf.int32))
        ep.init_shards(strategy, created, seed)
        self.exchange = ep.ExpertExchange(strategy)

    # ---- gating ----------------------------------------------------------------------
    def _gate_logits(self, x, kernel):
        """`x · kernel` in the compute dtype, then in float32 (float64) for the gate's softmax,
        noise and normal CDF."""
        logits = ops.matmul(x, ops.cast(kernel, self.compute_dtype))
        return ops.cast(logits, softmax_dtype(self))

    def _noisy_top_k(self, clean, raw_noise, k, training, noise):
        """Equations 3–5 on `clean = x·W_g` ([n, m]) and `raw_noise = x·W_noise`.

        Returns the kept experts [n, k], their gates [n, k] (softmax over the kept k), the
        per-token contribution to Load [n, m] (P(x, i) of equation 9, or the 0/1 top-k
        indicator when the gate is not noisy) and the 0/1 top-k indicator [n, m].
        """
        m = clean.shape[-1]
        noisy = training and self.noisy_gating
        if noisy:
            stddev = ops.softplus(raw_noise) + self.noise_epsilon
            if noise is None:
                noise = keras.random.normal(ops.shape(clean), dtype=clean.dtype, seed=self.seed_generator)
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

    def route(self, flat_x, training=False, noise=None):
        """Who goes where, for tokens `flat_x` [n, d].

        Returns a dict: `token_ids`, `expert_ids`, `gates` (one entry per (token, expert)
        assignment), `importance` and `load` ([num_experts], equations 6 and 10, or 13 and 14)
        and `counts` ([num_experts], tokens each expert receives).

        `noise` replaces the standard-normal draws of a training call: [n, num_experts] for a
        flat layer; for a grouped one a pair `([n, groups], [n, groups, experts_per_group])` of
        which only the groups each token is sent to are read.
        """
        flat_x = ops.cast(flat_x, self.compute_dtype)
        if self.groups:
            return self._route_hierarchical(flat_x, training, noise)
        return self._route_flat(flat_x, training, noise)

    def _primary_gate(self, flat_x, training, noise):
        """The noisy top-k gate over the experts (flat) or the groups (hierarchical), equations
        3–5: `(token_ids, chosen ids, gates)`, one entry per assignment, token by token, and the
        per-token Load contributions and top-k indicator of `_noisy_top_k`."""
        n = ops.shape(flat_x)[0]
        noisy = training and self.noisy_gating
        raw = self._gate_logits(flat_x, self.noise_kernel) if noisy else None  # no noise at inference
        clean = self._gate_logits(flat_x, self.gate_kernel)
        kept, gates, probability, in_top = self._noisy_top_k(clean, raw, self.k_primary, training, noise)
        token_ids = tf.repeat(tf.range(n), self.k_primary)
        return token_ids, ops.reshape(kept, (-1,)), ops.reshape(gates, (-1,)), probability, in_top

    def _route_flat(self, flat_x, training, noise):
        token_ids, expert_ids, gates, probability, in_top = self._primary_gate(flat_x, training, noise)
        importance, load, counts = sum_over_replicas(
            tf.math.unsorted_segment_sum(gates, expert_ids, self.num_experts),  # equation 6
            ops.sum(probability, axis=0),  # equation 10
            ops.cast(ops.sum(in_top, axis=0), probability.dtype),
        )
        return {"token_ids": token_ids, "expert_ids": expert_ids, "gates": gates, "importance": importance,
                "load": load, "counts": counts}

    def _route_hierarchical(self, flat_x, training, noise):
        """Appendix B: the primary gate picks groups, then each group's secondary gate picks its
        experts, run only on X^(i), the tokens the primary gate sends to group i, so a token pays
        for k_primary secondary gates, not for all of them."""
        primary_noise, secondary_noise = noise if noise is not None else (None, None)
        token_ids, first_ids, first_gates, probability, in_top = self._primary_gate(
            flat_x, training, primary_noise)
        noisy = training and self.noisy_gating
        groups, per_group, k_secondary = self.groups, self.experts_per_group, self.k_secondary
        order, sizes = sort_by(first_ids, groups)  # the (token, group) pairs, group by group
        token_ids, first_ids, first_gates = (
            tf.gather(t, order) for t in (token_ids, first_ids, first_gates)
        )
        kernels = [self.secondary_gate_kernel] + ([self.secondary_noise_kernel] if noisy else [])
        kernel = ops.cast(ops.concatenate(kernels, axis=-1), self.compute_dtype)  # one matmul for both
        logits = segment_matmul(tf.gather(flat_x, token_ids), sizes, kernel)
        logits = ops.cast(logits, softmax_dtype(self))
        clean_s = logits[:, :per_group]
        raw_s = logits[:, per_group:] if noisy else None
        if secondary_noise is not None:
            pairs = ops.stack([token_ids, first_ids], axis=1)
            secondary_noise = tf.gather_nd(ops.convert_to_tensor(secondary_noise), pairs)
        kept_s, gates_s, probability_s, in_top_s = self._noisy_top_k(
            clean_s, raw_s, k_secondary, training, secondary_noise
        )
        expert_ids = ops.reshape(first_ids[:, None] * per_group + kept_s, (-1,))
        expert_gates = ops.reshape(first_gates[:, None] * gates_s, (-1,))  # equation 12
        importance, primary_load, tokens_per_group, secondary_load, counts = sum_over_replicas(
            # equation 13: Σ_x G_primary(x)_i · G_i(x)_j
            tf.math.unsorted_segment_sum(expert_gates, expert_ids, self.num_experts),
            ops.sum(probability, axis=0)[:, None],  # Load_primary(X)
            ops.cast(ops.sum(in_top, axis=0), probability.dtype)[:, None],  # |X^(i)|
            tf.math.unsorted_segment_sum(probability_s, first_ids, groups),  # Load_i(X^(i))
            ops.cast(tf.math.unsorted_segment_sum(in_top_s, first_ids, groups), probability.dtype),
        )
        # Equation 14. A group that received no token has a zero secondary load: max(·, 1) only
        # avoids 0/0.
        load = primary_load * secondary_load / ops.maximum(tokens_per_group, 1.0)
        return {
            "token_ids": tf.repeat(token_ids, k_secondary),
            "expert_ids": expert_ids,
            "gates": expert_gates,
            "importance": importance,
            "load": ops.reshape(load, (-1,)),
            "counts": ops.reshape(counts, (-1,)),
        }

    def gates(self, x, training=False, noise=None):
        """The dense [tokens, num_experts] gate matrix (tokens = all leading positions of `x`),
        zero outside each token's experts; for testing and inspection, not for the forward pass."""
        if not self.built:
            self.build(tuple(x.shape))
        flat = ops.reshape(x, (-1, self.input_dim))
        routing = self.route(flat, training, noise)
        n = ops.shape(flat)[0]
        index = routing["token_ids"] * self.num_experts + routing["expert_ids"]
        dense = tf.math.unsorted_segment_sum(routing["gates"], index, n * self.num_experts)
        return ops.reshape(dense, (-1, self.num_experts))

    # ---- experts ---------------------------------------------------------------------
    def _experts(self, flat_x, routing):
        """`Σ_i G(x)_i E_i(x)` over each token's own experts only: the assignments are sorted by
        expert, each expert runs on its slice, the results go back to their tokens."""
        experts = self.num_experts
        order, sizes = sort_by(routing["expert_ids"], experts)
        token_ids, expert_ids, gates = (
            tf.gather(routing[key], order) for key in ("token_ids", "expert_ids", "gates")
        )
        w_in, b_in, w_out, b_out = (
            ops.cast(w, self.compute_dtype)
            for w in (self.expert_kernel_in, self.expert_bias_in, self.expert_kernel_out, self.expert_bias_out)
        )
        rows = tf.gather(flat_x, token_ids)  # k rows per token, expert by expert
        hidden = ops.relu(segment_matmul(rows, sizes, w_in) + tf.gather(b_in, expert_ids))
        outputs = segment_matmul(hidden, sizes, w_out) + tf.gather(b_out, expert_ids)
        weighted = outputs * ops.cast(gates, self.compute_dtype)[:, None]
        return tf.math.unsorted_segment_sum(weighted, token_ids, ops.shape(flat_x)[0])

    def capacity(self, tokens_per_replica):
        """Assignments each (replica, expert) pair can receive in one exchange:
        ceil(capacity_factor · tokens per replica · experts per token / num_experts), an int32
        tensor (tokens per replica: the mean over the replicas, so that every replica agrees)."""
        per_token = self.k_primary * (self.k_secondary or 1)
        tokens = tf.cast(tokens_per_replica, tf.float64)
        return tf.cast(tf.math.ceil(self.capacity_factor * tokens * per_token / self.num_experts), tf.int32)

    def _experts_parallel(self, flat_x, routing):
        """`_experts` with the experts sharded over R replicas (replica r holds experts
        [r·E/R, (r+1)·E/R)): each assignment goes to the replica holding its expert, in a slot of
        a fixed-size [R, E/R, capacity] exchange; every replica runs its own experts on what it
        received; the outputs come back by the reverse exchange.

        Over capacity: an expert takes a replica's assignments in token order up to `capacity`;
        the rest are dropped (counted in `<name>_dropped`) and the token's remaining gates are
        renormalised to the sum its gates had, so its output stays a convex combination of the
        experts it did reach, as with the top-k softmax; a token that reaches none of its experts
        gets zeros (through a residual connection it passes unchanged). With enough capacity
        nothing is dropped and the output is the replicated layer's."""
        if tf.distribute.in_cross_replica_context() or tf.distribute.get_replica_context() is None:
            raise ValueError(f"{self.name}: an expert-parallel SparseMoE runs inside strategy.run of the strategy "
                             "it was built under.")
        replicas, local = self.replicas, self.num_experts // self.replicas
        dim, out = self.input_dim, self.output_dim
        n = tf.shape(flat_x)[0]
        # one capacity for every replica (the exchanged blocks must have one shape): from the
        # mean number of tokens per replica
        (total,) = sum_over_replicas(tf.cast(n, tf.float32))
        capacity = self.capacity(total / replicas)
        expert_ids, token_ids, gates = routing["expert_ids"], routing["token_ids"], routing["gates"]
        order, sizes = sort_by(expert_ids, self.num_experts)
        sorted_experts = tf.gather(expert_ids, order)
        starts = tf.cumsum(sizes, exclusive=True)
        slot_sorted = tf.range(tf.size(expert_ids)) - tf.gather(starts, sorted_experts)
        slot = tf.scatter_nd(order[:, None], slot_sorted, tf.shape(expert_ids))
        kept = slot < capacity
        dropped = tf.reduce_sum(tf.cast(~kept, tf.float32))
        # renormalise each token's kept gates to the sum of all its gates (1 for the top-k softmax)
        all_sum = tf.math.unsorted_segment_sum(gates, token_ids, n)
        kept_gates = tf.where(kept, gates, tf.zeros_like(gates))
        kept_sum = tf.math.unsorted_segment_sum(kept_gates, token_ids, n)
        scale = tf.math.divide_no_nan(all_sum, kept_sum)
        gates = kept_gates * tf.gather(scale, token_ids)
        index = tf.stack([expert_ids // local, expert_ids % local, slot], axis=1)
        index = tf.boolean_mask(index, kept)
        token_kept = tf.boolean_mask(token_ids, kept)
        gates_kept = tf.boolean_mask(gates, kept)
        rows = tf.gather(flat_x, token_kept)
        send = tf.scatter_nd(index, rows, tf.stack([replicas, local, capacity, dim]))
        received = self.exchange.exchange(tf.reshape(send, [replicas, -1]))
        per_expert = tf.reshape(tf.transpose(tf.reshape(received, [replicas, local, capacity, dim]), [1, 0, 2, 3]),
                                [local, replicas * capacity, dim])
        w_in, b_in, w_out, b_out = (
            ops.cast(w, self.compute_dtype)
            for w in (self.expert_kernel_in, self.expert_bias_in, self.expert_kernel_out, self.expert_bias_out)
        )
        hidden = ops.relu(tf.matmul(per_expert, w_in) + b_in[:, None, :])
        outputs = tf.matmul(hidden, w_out) + b_out[:, None, :]  # [local, R·capacity, out]
        back = tf.transpose(tf.reshape(outputs, [local, replicas, capacity, out]), [1, 0, 2, 3])
        returned = tf.reshape(self.exchange.exchange(tf.reshape(back, [replicas, -1])),
                              [replicas, local, capacity, out])
        outputs = tf.gather_nd(returned, index)
        weighted = outputs * ops.cast(gates_kept, self.compute_dtype)[:, None]
        if self.track_metrics and not balance_metrics_are_paused():
            self.dropped_tracker.update_state(dropped)
        return tf.math.unsorted_segment_sum(weighted, token_kept, n)

    # ---- losses and metrics ----------------------------------------------------------
    def _balance(self, routing, training):
        if training:
            if self.importance_weight:
                self.add_loss(self.importance_weight * cv_squared(routing["importance"]))  # eq. 7
            if self.load_weight:
                self.add_loss(self.load_weight * cv_squared(routing["load"]))  # eq. 11
        if not self.track_metrics or balance_metrics_are_paused():
            return
        # Table 6's statistics, on the tokens the experts really receive.
        importance = ops.stop_gradient(routing["importance"])
        counts = ops.stop_gradient(routing["counts"])
        self.cv_importance_tracker.update_state(ops.sqrt(cv_squared(importance)))
        self.cv_load_tracker.update_state(ops.sqrt(cv_squared(counts)))
        self.max_load_ratio_tracker.update_state(ops.max(counts) / (ops.mean(counts) + CV_EPSILON))

    def call(self, inputs, training=None, noise=None):
        training = bool(training)
        flat = ops.reshape(inputs, (-1, self.input_dim))  # §3.1: every position is one token
        routing = self.route(flat, training, noise)
        if self.expert_parallel:
            outputs = self._experts_parallel(flat, routing)
        else:
            outputs = self._experts(flat, routing)
        self._balance(routing, training)
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
