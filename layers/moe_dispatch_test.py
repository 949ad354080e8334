"""Dispatch and combine alone: the local dispatch equals a dense computation of equation 1 (every
expert on every token, weighted by the dense gate matrix), and the expert-parallel dispatch, run
on one replica whose exchange gives back what it is sent, equals it with enough capacity and
drops and renormalises exactly as described over capacity. (Several replicas:
layers/expert_parallel_test.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from zoo.layers.moe_dispatch import ExpertParallelDispatch, ExpertWeights, dispatch_local, expert_capacity

N, D, H, O, E = 7, 4, 5, 3, 4


class Loopback:
    """The exchange of one replica: what is sent comes back."""

    replicas = 1

    def exchange(self, t):
        return t


def experts(seed=0):
    rng = np.random.default_rng(seed)
    return ExpertWeights(*(tf.constant(rng.normal(size=s)) for s in ((E, D, H), (E, H), (E, H, O), (E, O))))


def routing(seed=1, k=2):
    """k distinct experts per token, with gates summing to 1 per token."""
    rng = np.random.default_rng(seed)
    expert_ids = np.stack([rng.permutation(E)[:k] for _ in range(N)]).ravel()
    gates = rng.dirichlet(np.ones(k), size=N).ravel()
    return {"token_ids": tf.constant(np.repeat(np.arange(N), k), tf.int32),
            "expert_ids": tf.constant(expert_ids, tf.int32), "gates": tf.constant(gates)}


def dense(x, routing, w):
    """Σ_i G(x)_i E_i(x) with every expert on every token (numpy)."""
    gates = np.zeros((N, E))
    gates[routing["token_ids"].numpy(), routing["expert_ids"].numpy()] = routing["gates"].numpy()
    kernel_in, bias_in, kernel_out, bias_out = (v.numpy() for v in w[:4])
    hidden = np.maximum(np.einsum("nd,edh->neh", x, kernel_in) + bias_in, 0.0)
    return np.einsum("ne,neo->no", gates, np.einsum("neh,eho->neo", hidden, kernel_out) + bias_out)


def test_local_dispatch_and_combine_equals_the_dense_mixture():
    x = np.random.default_rng(2).normal(size=(N, D))
    r, w = routing(), experts()
    np.testing.assert_allclose(dispatch_local(tf.constant(x), r, w).numpy(), dense(x, r, w), rtol=1e-12, atol=1e-12)


def test_local_dispatch_gradients_equal_the_dense_mixtures():
    x = tf.constant(np.random.default_rng(2).normal(size=(N, D)))
    r, w = routing(), experts()
    gates = tf.scatter_nd(tf.stack([r["token_ids"], r["expert_ids"]], 1), r["gates"], (N, E))
    upstream = tf.constant(np.random.default_rng(3).normal(size=(N, O)))

    def dense_tf(x, w):
        hidden = tf.nn.relu(tf.einsum("nd,edh->neh", x, w.kernel_in) + w.bias_in)
        return tf.einsum("ne,neo->no", gates, tf.einsum("neh,eho->neo", hidden, w.kernel_out) + w.bias_out)

    grads = []
    for fn in (lambda x, w: dispatch_local(x, r, w), dense_tf):
        with tf.GradientTape() as tape:
            tape.watch([x, *w[:4]])
            y = fn(x, w)
        grads.append(tape.gradient(y, [x, *w[:4]], output_gradients=upstream))
    for ours, reference in zip(*grads):
        np.testing.assert_allclose(tf.convert_to_tensor(ours).numpy(), reference.numpy(), rtol=1e-10, atol=1e-12)


def test_expert_parallel_dispatch_with_enough_capacity_equals_the_local_one():
    x = tf.constant(np.random.default_rng(2).normal(size=(N, D)))
    r, w = routing(), experts()
    dispatch = ExpertParallelDispatch(Loopback(), E, capacity_factor=float(E), experts_per_token=2)
    outputs, dropped = dispatch(x, r, w)
    assert float(dropped) == 0.0
    np.testing.assert_allclose(outputs.numpy(), dispatch_local(x, r, w).numpy(), rtol=1e-12, atol=1e-12)


def test_over_capacity_assignments_are_dropped_in_token_order_and_gates_renormalised():
    x = tf.constant(np.random.default_rng(2).normal(size=(3, D)))
    # capacity ceil(1.0 · 3 · 2 / 4) = 2: expert 0 takes tokens 0 and 1, token 2's share is dropped
    r = {"token_ids": tf.constant([0, 0, 1, 1, 2, 2]), "expert_ids": tf.constant([0, 1, 0, 2, 0, 3]),
         "gates": tf.constant([0.5, 0.5, 0.3, 0.7, 0.4, 0.6], tf.float64)}
    w = experts()
    dispatch = ExpertParallelDispatch(Loopback(), E, capacity_factor=1.0, experts_per_token=2)
    assert int(dispatch.capacity(3)) == 2
    outputs, dropped = dispatch(x, r, w)
    assert float(dropped) == 1.0
    kept = {"token_ids": tf.constant([0, 0, 1, 1, 2]), "expert_ids": tf.constant([0, 1, 0, 2, 3]),
            "gates": tf.constant([0.5, 0.5, 0.3, 0.7, 1.0], tf.float64)}  # token 2: 0.6 scaled to 1
    np.testing.assert_allclose(outputs.numpy(), dispatch_local(x, kept, w).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("factor, tokens, per_token, experts_, expected", [
    (2.0, 10, 2, 8, 5), (1.0, 10, 2, 8, 3), (1.0, 0, 4, 8, 0), (0.5, 7, 1, 1, 4)])
def test_expert_capacity_is_the_ceiling_of_the_formula(factor, tokens, per_token, experts_, expected):
    assert int(expert_capacity(factor, tokens, per_token, experts_)) == expected


def test_expert_parallel_dispatch_refuses_a_cross_replica_call():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    dispatch = ExpertParallelDispatch(Loopback(), E, 1.0, 2, name="moe_1")
    with strategy.scope(), pytest.raises(ValueError, match="moe_1: an expert-parallel SparseMoE runs inside "
                                                          "strategy.run"):
        dispatch(tf.zeros((N, D), tf.float64), routing(), experts())
