"""`NoisyTopKRouter` alone: top-k on hand-made logits, the Load of equations 8–10 against a numpy
transcription of the paper's P(x, i), the hierarchical expert numbering and sums (equations
12–14), the balancing losses and the seeded noise draws."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import check_gradients
from zoo.layers.moe_router import (
    GateKernels,
    NoisyTopKRouter,
    balance_losses,
    balance_statistics,
    cv_squared,
    dense_gates,
)

EPS = 1e-2


def hand_route(logits, k, **kwargs):
    """Route n tokens whose clean logits are `logits` [n, m]: x = I_n and W_g = logits."""
    logits = np.asarray(logits, "float64")
    router = NoisyTopKRouter(num_experts=logits.shape[1], k=k, **kwargs)
    return router.route(tf.eye(len(logits), dtype="float64"), GateKernels(gate=tf.constant(logits)))


def test_top_k_on_hand_made_logits_keeps_the_k_largest_and_softmaxes_them():
    routing = hand_route([[0.0, 3.0, 1.0, 2.0], [5.0, 5.0, 5.0, -1.0]], k=2)
    assert routing["token_ids"].numpy().tolist() == [0, 0, 1, 1]
    assert routing["expert_ids"].numpy().tolist() == [1, 3, 0, 1]  # a tie goes to the lower index
    e = math.exp(1.0)
    np.testing.assert_allclose(routing["gates"].numpy(), [e / (e + 1), 1 / (e + 1), 0.5, 0.5], rtol=1e-12)
    np.testing.assert_allclose(routing["importance"].numpy(), [0.5, e / (e + 1) + 0.5, 0.0, 1 / (e + 1)],
                               rtol=1e-12)
    # without noise, Load is the hard count (and so are the counts)
    assert routing["load"].numpy().tolist() == routing["counts"].numpy().tolist() == [1, 2, 0, 1]
    np.testing.assert_allclose(dense_gates(routing, 2, 4).numpy()[0], [0, e / (e + 1), 0, 1 / (e + 1)], rtol=1e-12)


def test_k_1_gives_gate_1():
    routing = hand_route([[0.0, 3.0, 1.0]], k=1)
    assert routing["expert_ids"].numpy().tolist() == [1] and routing["gates"].numpy().tolist() == [1.0]


# ---- Load: P(x, i) of equations 8–9 -------------------------------------------------------------
def phi(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def paper_probability(clean, std, noise, k):
    """P(x, i) = Φ((x·W_g)_i − kth_excluding(H(x), k, i)) / std_i), kth_excluding taken literally:
    drop entry i of H(x), sort the rest, take the k-th largest."""
    h = clean + noise * std
    p = np.zeros_like(h)
    for t in range(h.shape[0]):
        for i in range(h.shape[1]):
            kth_excluding = np.sort(np.delete(h[t], i))[::-1][k - 1]
            p[t, i] = phi((clean[t, i] - kth_excluding) / std[t, i])
    return p


def noisy_case(k=2):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 5))
    w_gate, w_noise = rng.normal(size=(5, 6)), 0.5 * rng.normal(size=(5, 6))
    noise = rng.normal(size=(9, 6))
    router = NoisyTopKRouter(num_experts=6, k=k)
    return router, x, tf.Variable(w_gate), tf.Variable(w_noise), noise


@pytest.mark.parametrize("k", [1, 2, 5])
def test_load_is_the_sum_of_the_papers_probability(k):
    router, x, w_gate, w_noise, noise = noisy_case(k)
    routing = router.route(tf.constant(x), GateKernels(w_gate, w_noise), training=True, noise=noise)
    clean, std = x @ w_gate.numpy(), np.logaddexp(0.0, x @ w_noise.numpy()) + EPS
    np.testing.assert_allclose(routing["load"].numpy(), paper_probability(clean, std, noise, k).sum(0), rtol=1e-10)
    h = clean + noise * std  # the gates are the top-k softmax of the noisy logits H(x)
    top = np.argsort(-h, axis=1, kind="stable")[:, :k]
    assert routing["expert_ids"].numpy().reshape(-1, k).tolist() == top.tolist()
    assert routing["counts"].numpy().sum() == 9 * k


def test_load_loss_gradient_matches_finite_differences():
    router, x, w_gate, w_noise, noise = noisy_case()

    def load_loss():
        routing = router.route(tf.constant(x), GateKernels(w_gate, w_noise), training=True, noise=noise)
        return balance_losses(routing, 0.0, 1.0)[0]

    check_gradients(load_loss, [w_gate, w_noise], np.random.default_rng(1))


# ---- hierarchical (Appendix B) ------------------------------------------------------------------
def test_hierarchical_expert_ids_gates_and_sums_are_equations_12_to_14():
    # 2 tokens, 2 groups of 3 experts; x = I_2, so row t of each kernel is token t's logits
    primary = np.array([[2.0, 0.0], [0.0, 1.0]])
    secondary = np.array([[[1.0, 0.0, 3.0], [0.0, 2.0, 1.0]],  # group 0
                          [[0.0, 0.0, 0.0], [4.0, 0.0, 1.0]]])  # group 1
    router = NoisyTopKRouter(num_experts=6, k=[1, 2], groups=2, noisy_gating=False)
    routing = router.route(tf.eye(2, dtype="float64"), GateKernels(
        gate=tf.constant(primary), secondary_gate=tf.constant(secondary)))
    # token 0 -> group 0 -> its experts 2, 0; token 1 -> group 1 -> its experts 0, 2 (ids 3, 5)
    assert routing["token_ids"].numpy().tolist() == [0, 0, 1, 1]
    assert routing["expert_ids"].numpy().tolist() == [2, 0, 3, 5]
    s0, s1 = 1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(-3.0))  # two-way softmaxes
    np.testing.assert_allclose(routing["gates"].numpy(), [s0, 1 - s0, s1, 1 - s1], rtol=1e-12)
    np.testing.assert_allclose(routing["importance"].numpy(), [1 - s0, 0, s0, s1, 0, 1 - s1], rtol=1e-12)
    # equation 14 without noise: Load_primary(X)_i · Load_i(X^(i))_j / |X^(i)|, the counts here
    assert routing["load"].numpy().tolist() == routing["counts"].numpy().tolist() == [1, 0, 1, 1, 0, 1]


# ---- losses, statistics, noise --------------------------------------------------------------------
def test_balance_losses_are_the_weighted_cv_squared_and_zero_weights_give_none():
    routing = {"importance": tf.constant([1.0, 2.0, 3.0, 6.0]), "load": tf.constant([2.0, 2.0, 2.0, 2.0])}
    importance_loss, load_loss = balance_losses(routing, 0.5, 0.1)
    np.testing.assert_allclose(importance_loss.numpy(), 0.5 * 3.5 / 9, rtol=1e-6)  # population variance
    assert load_loss.numpy() == 0.0
    assert balance_losses(routing, 0.0, 0.0) == []
    assert cv_squared(np.zeros(3)).numpy() == 0.0


def test_balance_statistics_are_table_6s():
    counts = tf.constant([1.0, 1.0, 4.0])
    cv_importance, cv_load, max_ratio = balance_statistics({"importance": counts, "counts": counts})
    np.testing.assert_allclose([cv_importance.numpy(), cv_load.numpy()], math.sqrt(2.0) / 2, rtol=1e-6)
    np.testing.assert_allclose(max_ratio.numpy(), 2.0, rtol=1e-6)


def test_noise_is_drawn_in_training_only_and_repeats_with_the_seed():
    _, x, w_gate, w_noise, _ = noisy_case()
    kernels = GateKernels(w_gate, w_noise)

    def gates(seed, training):
        router = NoisyTopKRouter(num_experts=6, k=2, seed=keras.random.SeedGenerator(seed))
        return [router.route(tf.constant(x), kernels, training=training)["gates"].numpy() for _ in range(2)]

    first, again = gates(3, True), gates(3, True)
    np.testing.assert_array_equal(first[0], again[0])  # the same seed draws the same noise
    assert not np.array_equal(first[0], first[1])  # and a second call draws afresh
    np.testing.assert_array_equal(*gates(3, False))  # inference: no noise


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_experts=4, k=5), r"k must be an integer in \[1, num_experts\] = \[1, 4\], got 5"),
    (dict(num_experts=6, k=2, groups=4), "6 experts cannot be split into groups=4"),
    (dict(num_experts=4, k=2, noisy_gating=1), "noisy_gating must be True or False, got 1"),
    (dict(num_experts=4, k=2, noise_epsilon=-1), "noise_epsilon must be a number >= 0, got -1"),
])
def test_bad_arguments_raise_one_sentence(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NoisyTopKRouter(**kwargs)
