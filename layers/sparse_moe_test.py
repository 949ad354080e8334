import math

import numpy as np
import pytest
import tensorflow as tf
import keras

from zoo.layers import segment_ops, sparse_moe
from zoo.layers.sparse_moe import SparseMoE, cv_squared
from tests.layer_checks import check_gradients
from zoo.tools.benchmarks.moe import all_experts  # [tokens, experts, out]: the dense reference of equation 1

DIM, EXPERTS, HIDDEN, K = 8, 6, 16, 2
EPS = 1e-2  # noise_epsilon


def make(dtype="float32", seed=0, scale=1.0, **kwargs):
    """A built layer whose gate weights are random (the zero initialisation ties every expert)."""
    options = dict(num_experts=EXPERTS, k=K, hidden_units=HIDDEN)
    options.update(kwargs)
    layer = SparseMoE(dtype=dtype, **options)
    layer.build((None, DIM))
    rng = np.random.default_rng(seed)
    for var in layer.weights:
        if "gate" in var.path or "noise" in var.path:
            var.assign(scale * rng.normal(size=var.shape))
        elif "bias" in var.path:  # non-zero biases, so a test also sees them
            var.assign(0.1 * rng.normal(size=var.shape))
    return layer


def tokens(n=7, seed=1, dtype="float32", shape=None):
    return np.random.default_rng(seed).normal(size=shape or (n, DIM)).astype(dtype)


# ---- numpy references ---------------------------------------------------------------------
def softplus(z):
    return np.logaddexp(0.0, z)


def phi(z):
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


def top_k_softmax(logits, k):
    """Softmax(KeepTopK(logits, k)) row by row (equations 3 and 5)."""
    gates = np.zeros_like(logits)
    for t, row in enumerate(logits):
        top = np.argsort(-row, kind="stable")[:k]
        e = np.exp(row[top] - row[top].max())
        gates[t, top] = e / e.sum()
    return gates


def noisy_logits(x, w_gate, w_noise, noise):
    """H(x) of equation 4, with the noise std Softplus(x·W_noise) + epsilon."""
    return x @ w_gate + noise * (softplus(x @ w_noise) + EPS)


def load_probability(x, w_gate, w_noise, noise, k):
    """P(x, i) of equations 8–9, kth_excluding taken literally: drop entry i, sort, take the k-th."""
    h = noisy_logits(x, w_gate, w_noise, noise)
    clean, std = x @ w_gate, softplus(x @ w_noise) + EPS
    p = np.zeros_like(h)
    for t in range(h.shape[0]):
        for i in range(h.shape[1]):
            kth_excluding = np.sort(np.delete(h[t], i))[::-1][k - 1]
            p[t, i] = phi((clean[t, i] - kth_excluding) / std[t, i])
    return p


def cv2(v):
    return v.var() / v.mean() ** 2  # population variance


def mixture(gates, experts):
    return np.einsum("te,teo->to", gates, experts)


# ---- 1. sparse dispatch equals the dense mixture ------------------------------------------------
def test_sparse_dispatch_equals_dense_reference_at_inference():
    layer = make()
    x = tokens()
    expected_gates = top_k_softmax(x @ layer.gate_kernel.numpy(), K)
    gates = layer.gates(x).numpy()
    np.testing.assert_allclose(gates, expected_gates, atol=1e-6)
    assert ((gates > 0).sum(1) == K).all()
    y = layer(x).numpy()
    np.testing.assert_allclose(y, mixture(expected_gates, all_experts(layer, x)), atol=1e-5)
    # no noise at inference: the same answer twice, and under tf.function
    np.testing.assert_array_equal(layer(x).numpy(), y)
    np.testing.assert_allclose(tf.function(lambda v: layer(v, training=False))(x).numpy(), y, atol=1e-6)


def test_sparse_dispatch_equals_dense_reference_in_training_with_given_noise():
    layer = make()
    x = tokens()
    noise = np.random.default_rng(2).normal(size=(len(x), EXPERTS)).astype("float32")
    h = noisy_logits(x, layer.gate_kernel.numpy(), layer.noise_kernel.numpy(), noise)
    expected_gates = top_k_softmax(h, K)
    assert not np.allclose(expected_gates, top_k_softmax(x @ layer.gate_kernel.numpy(), K))
    np.testing.assert_allclose(layer.gates(x, training=True, noise=noise).numpy(), expected_gates, atol=1e-6)
    y = layer(x, training=True, noise=noise).numpy()
    np.testing.assert_allclose(y, mixture(expected_gates, all_experts(layer, x)), atol=1e-5)
    # with fresh noise, two training calls differ
    assert not np.allclose(layer(x, training=True).numpy(), layer(x, training=True).numpy())


def test_no_tokens_experts_hidden_tensor_and_one_matmul_pair_per_expert():
    layer = make()
    graph = tf.function(lambda v: layer(v, training=True)).get_concrete_function(
        tf.TensorSpec((None, DIM))
    ).graph
    shapes = [t.shape for op in graph.get_operations() for t in op.outputs if t.shape.rank is not None]
    assert not [s for s in shapes if s.rank >= 3 and None in s.as_list() and HIDDEN in s.as_list()]
    hidden_matmuls = [op for op in graph.get_operations() if op.type == "MatMul"
                      and op.outputs[0].shape.as_list() == [None, HIDDEN]]
    assert len(hidden_matmuls) == EXPERTS
    # each expert sees its own slice of the gathered rows, not every token
    assert all(op.inputs[0].op.type == "SplitV" for op in hidden_matmuls)


# ---- 2. gradients ------------------------------------------------------------------------------
@pytest.mark.parametrize("experts, groups, k", [(EXPERTS, None, K), (12, 3, [2, 2])])
def test_gradients_match_finite_differences(experts, groups, k):
    """Both levels keep k >= 2 of more than k, so every gate weight has a gradient everywhere."""
    layer = make("float64", num_experts=experts, groups=groups, k=k)
    x = tf.Variable(tokens(6, dtype="float64"))
    rng = np.random.default_rng(3)
    if groups is None:
        noise = rng.normal(size=(6, experts))
    else:
        noise = (rng.normal(size=(6, groups)), rng.normal(size=(6, groups, experts // groups)))
    weights = rng.normal(size=(6, DIM))
    gate_vars = [layer.gate_kernel, layer.noise_kernel]
    if groups:
        gate_vars += [layer.secondary_gate_kernel, layer.secondary_noise_kernel]

    def output():
        return tf.reduce_sum(layer(x, training=True, noise=noise) * weights)

    check_gradients(output, [x, layer.expert_kernel_in, layer.expert_bias_in, layer.expert_kernel_out,
                             layer.expert_bias_out] + gate_vars, rng)
    for i in range(2):  # L_importance, then L_load
        def loss():
            layer(x, training=True, noise=noise)
            return layer.losses[i]

        check_gradients(loss, gate_vars, rng)


def test_both_row_gradient_branches_give_the_same_layer_gradients(monkeypatch):
    layer = make()
    x = tf.constant(tokens(40))
    noise = np.random.default_rng(2).normal(size=(40, EXPERTS)).astype("float32")

    def grads():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True, noise=noise)
            loss = tf.reduce_sum(tf.square(y)) + tf.add_n(layer.losses)
        return tape.gradient(loss, layer.trainable_variables + [x])

    monkeypatch.setattr(segment_ops, "SMALL_SEGMENT_ROWS", 0)  # never "small"
    large = grads()
    monkeypatch.setattr(segment_ops, "SMALL_SEGMENT_ROWS", 10**6)  # always "small"
    small = grads()
    for a, b in zip(large, small):
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(), tf.convert_to_tensor(a).numpy(),
                                   rtol=1e-5, atol=1e-6)


MIRRORED = """
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from zoo.layers.sparse_moe import SparseMoE

x = np.random.default_rng(0).normal(size=(16, 8)).astype("float32")

def grads(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(1)
        layer = SparseMoE(6, 2, 16, noisy_gating=False)
        layer.build((None, 8))
        for i, v in enumerate(layer.trainable_variables):
            v.assign(np.random.default_rng(i).normal(size=v.shape))

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(inputs, training=True)))
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, layer.trainable_variables)]

    ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(16))
    per_replica = strategy.run(step, args=(next(iter(ds)),))
    summed = [strategy.reduce("SUM", g, axis=None) for g in per_replica]
    return [g.numpy().tolist() for g in summed]

one = grads(tf.distribute.OneDeviceStrategy("/cpu:0"))
two = grads(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
json.dump({"one": one, "two": two}, sys.stdout)
"""


@pytest.mark.ci
def test_gradients_under_mirrored_strategy_equal_one_device():
    """Each replica dispatches its own half of the batch (unknown size while tracing)."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", MIRRORED], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().split("\n")[-1])
    for a, b in zip(result["one"], result["two"]):
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-5)


# ---- 3. k = num_experts without noise is the plain softmax mixture (equation 2) ----------------
def test_all_experts_without_noise_is_the_softmax_mixture():
    layer = make(k=EXPERTS, noisy_gating=False)
    assert not hasattr(layer, "noise_kernel")
    x = tokens()
    logits = x @ layer.gate_kernel.numpy()
    softmax = np.exp(logits - logits.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    expected = mixture(softmax, all_experts(layer, x))
    for training in (False, True):
        np.testing.assert_allclose(layer(x, training=training).numpy(), expected, atol=1e-5)


# ---- 4. §3.1: every position of every sequence is one token -----------------------------------
def test_rank_3_input_equals_the_flattened_call():
    layer = make()
    x = tokens(shape=(3, 5, DIM))
    flat = x.reshape(-1, DIM)
    y = layer(x).numpy()
    assert y.shape == (3, 5, DIM)
    np.testing.assert_allclose(y.reshape(-1, DIM), layer(flat).numpy(), atol=1e-6)
    noise = np.random.default_rng(4).normal(size=(15, EXPERTS)).astype("float32")
    y = layer(x, training=True, noise=noise).numpy()
    losses = [v.numpy() for v in layer.losses]
    np.testing.assert_allclose(y.reshape(-1, DIM), layer(flat, training=True, noise=noise).numpy(), atol=1e-6)
    np.testing.assert_allclose(losses, [v.numpy() for v in layer.losses], rtol=1e-6)
    assert SparseMoE(EXPERTS, K, HIDDEN, output_units=3)(x).shape == (3, 5, 3)
    assert layer(np.zeros((2, 0, DIM), "float32"), training=True).shape == (2, 0, DIM)  # no tokens


# ---- 5. losses --------------------------------------------------------------------------------
def test_cv_squared_uses_the_population_variance():
    # mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5 (the sample variance would be 14/3)
    np.testing.assert_allclose(cv_squared(np.array([1.0, 2.0, 3.0, 6.0])).numpy(), 3.5 / 9, rtol=1e-6)
    assert cv_squared(np.full(5, 2.5)).numpy() == 0
    assert cv_squared(np.zeros(4)).numpy() == 0


def test_uniform_gates_give_zero_losses():
    layer = SparseMoE(EXPERTS, EXPERTS, HIDDEN, noisy_gating=False)  # zero W_g: gates all 1/6
    layer(tokens(), training=True)
    assert len(layer.losses) == 2
    np.testing.assert_allclose([v.numpy() for v in layer.losses], 0.0, atol=1e-12)
    np.testing.assert_allclose(layer.cv_importance_tracker.result().numpy(), 0.0, atol=1e-6)


def test_losses_follow_equations_6_to_11():
    layer = make("float64", importance_weight=0.3, load_weight=0.2, scale=0.5)
    x = tokens(9, dtype="float64")
    noise = np.random.default_rng(5).normal(size=(9, EXPERTS))
    w_gate, w_noise = layer.gate_kernel.numpy(), layer.noise_kernel.numpy()
    importance = top_k_softmax(noisy_logits(x, w_gate, w_noise, noise), K).sum(0)  # eq. 6
    load = load_probability(x, w_gate, w_noise, noise, K).sum(0)  # eq. 10
    layer(x, training=True, noise=noise)
    importance_loss, load_loss = (v.numpy() for v in layer.losses)
    np.testing.assert_allclose(importance_loss, 0.3 * cv2(importance), rtol=1e-6)  # eq. 7
    np.testing.assert_allclose(load_loss, 0.2 * cv2(load), rtol=1e-6)  # eq. 11
    # the estimator is close to, but not, the hard count of tokens per expert
    counts = (layer.gates(x, training=True, noise=noise).numpy() > 0).sum(0)
    assert not np.allclose(load, counts) and abs(load.sum() - counts.sum()) < 0.5 * counts.sum()
    # at inference, Load is the hard count
    gates = layer.gates(x).numpy()
    routing = layer.route(tf.constant(x), training=False)
    np.testing.assert_allclose(routing["load"].numpy(), (gates > 0).sum(0))
    np.testing.assert_allclose(routing["importance"].numpy(), gates.sum(0), atol=1e-12)


def test_loss_weights_scale_the_losses_linearly_and_zero_adds_none():
    base = make(importance_weight=0.1, load_weight=0.1)
    x = tokens()
    noise = np.random.default_rng(6).normal(size=(len(x), EXPERTS)).astype("float32")
    base(x, training=True, noise=noise)
    importance, load = (v.numpy() for v in base.losses)
    assert importance > 0 and load > 0

    def losses(importance_weight, load_weight):
        config = dict(base.get_config(), name=None,
                      importance_weight=importance_weight, load_weight=load_weight)
        other = SparseMoE.from_config(config)
        other.build((None, DIM))
        other.set_weights(base.get_weights())
        other(x, training=True, noise=noise)
        return [v.numpy() for v in other.losses]

    np.testing.assert_allclose(losses(0.3, 0.7), [3 * importance, 7 * load], rtol=1e-5)
    np.testing.assert_allclose(losses(0.2, 0.0), [2 * importance], rtol=1e-5)
    np.testing.assert_allclose(losses(0.0, 0.5), [5 * load], rtol=1e-5)
    assert losses(0.0, 0.0) == []
    base(x)  # inference adds no loss
    assert base.losses == []


# ---- 6. hierarchical mixture (Appendix B) --------------------------------------------------------
def hierarchical_gates(layer, x, k_primary, k_secondary, noise=None):
    """Dense [tokens, experts] G_primary(x)_i · G_i(x)_j of equation 12."""
    groups, per_group = layer.groups, EXPERTS // layer.groups
    primary = x @ layer.gate_kernel.numpy()
    if noise is not None:
        primary = noisy_logits(x, layer.gate_kernel.numpy(), layer.noise_kernel.numpy(), noise[0])
    primary = top_k_softmax(primary, k_primary)
    gates = np.zeros((len(x), EXPERTS))
    for i in range(groups):
        secondary = x @ layer.secondary_gate_kernel.numpy()[i]
        if noise is not None:
            secondary = noisy_logits(x, layer.secondary_gate_kernel.numpy()[i],
                                     layer.secondary_noise_kernel.numpy()[i], noise[1][:, i])
        columns = slice(i * per_group, (i + 1) * per_group)  # expert (i, j) is i * per_group + j
        gates[:, columns] = primary[:, i:i + 1] * top_k_softmax(secondary, k_secondary)
    return gates


@pytest.mark.parametrize("k", [2, [1, 2], [2, 1]])
def test_hierarchical_output_is_equation_12(k):
    layer = make(groups=2, k=k)
    k_primary, k_secondary = (k, k) if isinstance(k, int) else k
    x = tokens(9)
    expected = hierarchical_gates(layer, x, k_primary, k_secondary)
    assert ((expected > 0).sum(1) == k_primary * k_secondary).all()
    np.testing.assert_allclose(layer.gates(x).numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(layer(x).numpy(), mixture(expected, all_experts(layer, x)), atol=1e-5)


def test_hierarchical_losses_are_equations_13_and_14():
    layer = make("float64", groups=2, k=[1, 2], scale=0.5)
    x = tokens(10, dtype="float64")
    rng = np.random.default_rng(7)
    noise = (rng.normal(size=(10, 2)), rng.normal(size=(10, 2, 3)))
    gates = hierarchical_gates(layer, x, 1, 2, noise)
    y = layer(x, training=True, noise=noise).numpy()
    np.testing.assert_allclose(y, mixture(gates, all_experts(layer, x)), atol=1e-10)
    importance = gates.sum(0)  # eq. 13
    w_gate, w_noise = layer.gate_kernel.numpy(), layer.noise_kernel.numpy()
    primary = top_k_softmax(noisy_logits(x, w_gate, w_noise, noise[0]), 1)
    load_primary = load_probability(x, w_gate, w_noise, noise[0], 1).sum(0)
    load = np.zeros((2, 3))
    for i in range(2):
        members = primary[:, i] > 0  # X^(i)
        secondary = load_probability(x[members], layer.secondary_gate_kernel.numpy()[i],
                                     layer.secondary_noise_kernel.numpy()[i], noise[1][members, i], 2)
        load[i] = load_primary[i] * secondary.sum(0) / members.sum()  # eq. 14
    importance_loss, load_loss = (v.numpy() for v in layer.losses)
    np.testing.assert_allclose(importance_loss, 0.1 * cv2(importance), rtol=1e-6)
    np.testing.assert_allclose(load_loss, 0.1 * cv2(load.ravel()), rtol=1e-6)


# ---- 7. bad arguments -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(k=0), r"k must be an integer in \[1, num_experts\] = \[1, 6\], got 0"),
        (dict(k=7), r"\[1, 6\], got 7"),
        (dict(groups=4), "6 experts cannot be split into groups=4"),
        (dict(importance_weight=-1), "importance_weight must be a number >= 0, got -1"),
        (dict(load_weight=-0.5), "load_weight must be a number >= 0, got -0.5"),
        (dict(groups=2, k=3), r"\[1, groups\] = \[1, 2\], got 3"),
        (dict(groups=2, k=[1, 4]), r"\[1, experts per group\] = \[1, 3\], got 4"),
        (dict(hidden_units=0), "hidden_units must be an integer >= 1, got 0"),
    ],
)
def test_bad_arguments_raise_one_clear_error(kwargs, match):
    options = dict(num_experts=EXPERTS, k=K, hidden_units=HIDDEN)
    options.update(kwargs)
    with pytest.raises(ValueError, match=match):
        SparseMoE(**options)


# ---- 8. serialisation -------------------------------------------------------------------------
@pytest.mark.parametrize("groups", [None, 2])
def test_serialisation_and_saving_round_trip(tmp_path, groups):
    layer = make(groups=groups, output_units=5)
    x = tokens(shape=(2, 4, DIM))
    clone = SparseMoE.from_config(layer.get_config())
    clone.build((None, DIM))
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(clone(x).numpy(), layer(x).numpy())
    assert clone.get_config() == layer.get_config()

    inputs = keras.Input((None, DIM))
    model = keras.Model(inputs, clone(inputs))
    path = str(tmp_path / "moe.keras")
    model.save(path)
    again = keras.models.load_model(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    assert again.layers[-1].get_config() == layer.get_config()


def test_variables_are_named_for_the_factorised_optimiser_and_gates_start_at_zero():
    layer = SparseMoE(EXPERTS, K, HIDDEN, groups=2, output_units=5)
    layer.build((None, DIM))
    shapes = {v.path.split("/")[-1]: tuple(v.shape) for v in layer.weights}
    assert shapes == {
        "expert_kernel_in": (EXPERTS, DIM, HIDDEN), "expert_bias_in": (EXPERTS, HIDDEN),
        "expert_kernel_out": (EXPERTS, HIDDEN, 5), "expert_bias_out": (EXPERTS, 5),
        "gate_kernel": (DIM, 2), "noise_kernel": (DIM, 2),
        "secondary_gate_kernel": (2, DIM, 3), "secondary_noise_kernel": (2, DIM, 3),
    }
    for v in layer.weights:  # Appendix A: W_g and W_noise start at zero
        assert ("expert" in v.path) != ("gate" in v.path or "noise" in v.path)
        assert ("expert" in v.path) == bool(np.any(v.numpy()) or "bias" in v.path)


# ---- 9. metrics in fit logs -------------------------------------------------------------------
def test_metrics_and_losses_reach_fit():
    inputs = keras.Input((5, DIM))
    moe = SparseMoE(EXPERTS, K, HIDDEN, name="moe")
    model = keras.Model(inputs, keras.layers.Dense(1)(moe(inputs)))
    with pytest.warns(UserWarning, match="jit_compile"):  # per-expert slices are data-dependent
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=True)
    assert model.jit_compile is False
    x = tokens(shape=(16, 5, DIM))
    y = np.random.default_rng(8).normal(size=(16, 5, 1)).astype("float32")
    # At inference the zero-initialised gate ties every expert: all tokens go to experts 0 and 1.
    before = model.evaluate(x, y, verbose=0, return_dict=True)
    np.testing.assert_allclose(before["moe_max_load_ratio"], EXPERTS / K, rtol=1e-6)
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), verbose=0).history
    for name in ("cv_importance", "cv_load", "max_load_ratio"):
        assert f"moe_{name}" in history and f"val_moe_{name}" in history
        assert all(np.isfinite(history[f"moe_{name}"]))
    # Training noise spreads the tokens from the start (Appendix A's initialisation).
    assert history["moe_max_load_ratio"][0] < EXPERTS / K
    model(x, training=True)
    assert len(model.losses) == 2  # what Keras adds to the training loss



@pytest.mark.ci  # two fits (7 s)
def test_track_metrics_false_in_the_call_stops_metric_updates_but_not_the_losses(tiny_model):
    layer = make()
    x = tokens()
    layer(x)
    count = int(layer.cv_importance_tracker.count.numpy())
    layer(x, training=True, track_metrics=False)
    assert len(layer.losses) == 2 and int(layer.cv_importance_tracker.count.numpy()) == count
    layer(x, training=True)
    assert int(layer.cv_importance_tracker.count.numpy()) == count + 1
    # a model's call passes it down; its step and prefill never track
    for family, overrides in (("gcnn", {"blocks": [[[3, 8]], [[2, 8]]],
                                        "moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8}}),
                              ("moe", {})):
        model = tiny_model(family, **overrides)
        moe = (model.moe_layers if family == "gcnn" else [l for l in model.stack if isinstance(l, SparseMoE)])[0]
        ids = np.array([[3, 4, 5, 6]])
        model(ids)
        count = int(moe.cv_importance_tracker.count.numpy())
        model(ids, track_metrics=False)
        model.served_hidden(ids)  # what the exported signatures run
        model.generate([[3, 4]], max_new_tokens=2, jit_compile=False)
        model.decode_step([3], None)
        assert int(moe.cv_importance_tracker.count.numpy()) == count, family


def test_balance_metrics_paused_is_deprecated_and_still_stops_metric_updates_of_every_layer_but_not_the_losses():
    outer, inner = make(), make()
    x = tokens()
    outer(x)
    counts = [int(m.count.numpy()) for m in (outer.cv_importance_tracker, inner.cv_load_tracker)]
    with pytest.warns(DeprecationWarning, match="track_metrics=False"), sparse_moe.balance_metrics_paused():
        with pytest.warns(DeprecationWarning), sparse_moe.balance_metrics_paused():  # nests
            pass
        assert sparse_moe.balance_metrics_are_paused()
        outer(x, training=True)
        inner(x)
        assert len(outer.losses) == 2  # the losses are still added
    assert not sparse_moe.balance_metrics_are_paused()
    assert [int(m.count.numpy()) for m in (outer.cv_importance_tracker, inner.cv_load_tracker)] == counts
    assert outer.track_metrics and inner.track_metrics  # left as they were
    outer(x)
    assert int(outer.cv_importance_tracker.count.numpy()) == counts[0] + 1


def test_mixed_precision_keeps_the_gate_in_float32():
    layer = make(dtype="mixed_bfloat16")
    x = tokens()
    assert layer(tf.cast(x, "bfloat16")).dtype == tf.bfloat16
    assert layer.gates(x).dtype == tf.float32
    layer(tf.cast(x, "bfloat16"), training=True)
    assert all(v.dtype == tf.float32 for v in layer.losses)
    with tf.GradientTape() as tape:
        y = layer(tf.cast(x, "bfloat16"), training=True)
        loss = tf.reduce_sum(tf.cast(y, "float32") ** 2) + tf.add_n(layer.losses)
    grads = tape.gradient(loss, layer.trainable_variables)
    assert all(g is not None and tf.convert_to_tensor(g).dtype == tf.float32 for g in grads)
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


# ---- 8. the balance losses' gradients, by hand from the paper's equations ------------------------
def paper_losses(x, kernels, noise, groups, k, weights=(0.1, 0.1)):
    """w_importance · CV(Importance)² + w_load · CV(Load)², written from the paper alone: equations
    6–10 (flat) or 12–14 (hierarchical), in numpy, from the gate kernels (a dict of arrays)."""
    w_importance, w_load = weights
    if not groups:
        gates = top_k_softmax(noisy_logits(x, kernels["gate"], kernels["noise"], noise), k)
        importance = gates.sum(0)  # eq. 6
        load = load_probability(x, kernels["gate"], kernels["noise"], noise, k).sum(0)  # eq. 8-10
        return w_importance * cv2(importance) + w_load * cv2(load)
    k_primary, k_secondary = k
    per_group = EXPERTS // groups
    primary = top_k_softmax(noisy_logits(x, kernels["gate"], kernels["noise"], noise[0]), k_primary)
    load_primary = load_probability(x, kernels["gate"], kernels["noise"], noise[0], k_primary).sum(0)
    importance, load = np.zeros(EXPERTS), np.zeros(EXPERTS)
    for i in range(groups):
        columns = slice(i * per_group, (i + 1) * per_group)
        secondary = top_k_softmax(noisy_logits(x, kernels["secondary_gate"][i], kernels["secondary_noise"][i],
                                               noise[1][:, i]), k_secondary)
        importance[columns] = (primary[:, i:i + 1] * secondary).sum(0)  # eq. 13
        members = primary[:, i] > 0  # X^(i)
        secondary_load = load_probability(x[members], kernels["secondary_gate"][i], kernels["secondary_noise"][i],
                                          noise[1][members, i], k_secondary).sum(0)
        load[columns] = load_primary[i] * secondary_load / max(members.sum(), 1)  # eq. 14
    return w_importance * cv2(importance) + w_load * cv2(load)


@pytest.mark.parametrize("groups, k", [(None, 2), (None, 3), (2, [1, 2]), (3, [2, 1])])
def test_balance_loss_gradients_follow_the_papers_equations_by_hand(groups, k):
    # The layer's gradients of its two losses (autodiff through its own code) against central
    # finite differences of the numpy transcription above: a wrong equation, a wrong stop-gradient
    # or a wrong kth_excluding moves one or the other.
    layer = make("float64", groups=groups, k=k, scale=0.5)
    x = tokens(10, seed=3, dtype="float64")
    rng = np.random.default_rng(11)
    noise = (rng.normal(size=(10, EXPERTS)) if not groups
             else (rng.normal(size=(10, groups)), rng.normal(size=(10, groups, EXPERTS // groups))))
    variables = {"gate": layer.gate_kernel, "noise": layer.noise_kernel}
    if groups:
        variables.update(secondary_gate=layer.secondary_gate_kernel, secondary_noise=layer.secondary_noise_kernel)
    with tf.GradientTape() as tape:
        layer(x, training=True, noise=noise)
        total = tf.add_n(layer.losses)
    grads = tape.gradient(total, list(variables.values()))
    kernels = {name: v.numpy() for name, v in variables.items()}
    np.testing.assert_allclose(total.numpy(), paper_losses(x, kernels, noise, groups, k), rtol=1e-9)
    step = 1e-6
    for (name, value), grad in zip(kernels.items(), grads):
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            plus, minus = dict(kernels), dict(kernels)
            plus[name], minus[name] = value.copy(), value.copy()
            plus[name][index] += step
            minus[name][index] -= step
            numeric[index] = (paper_losses(x, plus, noise, groups, k)
                              - paper_losses(x, minus, noise, groups, k)) / (2 * step)
        assert np.abs(numeric).max() > 1e-4, name  # the loss does depend on this kernel
        np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy(), numeric, atol=1e-6, rtol=1e-4, err_msg=name)


# ---- 9. int8 experts ------------------------------------------------------------------------------
def test_int8_experts_have_a_scale_per_expert_and_output_channel():
    layer = make()
    # expert 0's weights a thousandth of the others': one scale per output channel over every
    # expert would round them all to zero, one per expert and channel keeps them
    for name in ("expert_kernel_in", "expert_kernel_out"):
        variable = getattr(layer, name)
        values = variable.numpy()
        values[0] *= 1e-3
        variable.assign(values)
    x = tokens(40, seed=4)
    before = layer(x).numpy()
    kernels = {name: getattr(layer, name).numpy() for name in ("expert_kernel_in", "expert_kernel_out")}
    layer.quantize("int8")
    scales = {v.name: v.numpy() for v in layer.weights if v.name.endswith("_scale")}
    for name, values in kernels.items():
        q = getattr(layer, name).numpy()
        scale = scales[f"{name}_scale"]
        assert q.dtype == np.int8 and scale.shape == (EXPERTS, values.shape[-1])
        np.testing.assert_allclose(scale, np.abs(values).max(axis=1) / 127, rtol=1e-6)
        np.testing.assert_allclose(q * scale[:, None, :], values, atol=0.51 * scale.max(axis=(0, 1)).max())
        assert np.abs(q[0]).max() == 127  # expert 0 uses the whole int8 range
    after = layer(x).numpy()
    assert np.abs(after - before).max() < 0.02 * np.abs(before).max()
    # the same as the float layer holding q · scale
    exact = make()
    exact.set_weights(make().get_weights())
    for name in kernels:
        getattr(exact, name).assign(getattr(layer, name).numpy() * scales[f"{name}_scale"][:, None, :])
    for name in ("gate_kernel", "noise_kernel", "expert_bias_in", "expert_bias_out"):
        getattr(exact, name).assign(getattr(layer, name).numpy())
    np.testing.assert_allclose(after, exact(x).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="already quantized"):
        layer.quantize("int8")
