import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.factorized_adam import (
    FactorizedAdam,
    default_is_factored,
    factored_second_moment,
    is_counter_variable,
    optimizer_state_bytes,
)
from zoo.layers.moe_dispatch import mark_expert_matrix

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@keras.saving.register_keras_serializable(package="zoo_test")
class TinyExperts(keras.layers.Layer):
    """x [B, d] -> sum over experts of x @ W_e, with the expert weights stacked as [E, d, o]."""

    def __init__(self, experts=2, units=4, **kwargs):
        super().__init__(**kwargs)
        self.experts, self.units = experts, units

    def build(self, input_shape):
        self.expert_kernel = mark_expert_matrix(self.add_weight(
            name="expert_kernel", shape=(self.experts, input_shape[-1], self.units),
            initializer="glorot_uniform",
        ))

    def call(self, x):
        return tf.einsum("bi,eio->bo", x, self.expert_kernel)

    def get_config(self):
        return {**super().get_config(), "experts": self.experts, "units": self.units}


def tiny_model(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    hidden = TinyExperts(2, 4, name="moe")(inputs)
    outputs = keras.layers.Dense(1, name="head")(keras.layers.Activation("tanh")(hidden))
    return keras.Model(inputs, outputs)


def tiny_data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = np.sin(x @ np.array([[1.0], [-2.0], [0.5]], "float32"))
    return x, y


def train_step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)
    return float(loss)


# --------------------------------------------------------------------------- the update rules


@pytest.mark.parametrize("extra", [{}, {"clipnorm": 0.05}])
def test_non_expert_variables_follow_keras_adam_exactly(extra):
    rng = np.random.default_rng(0)
    shapes = {"dense_kernel": (3, 4), "bias": (4,), "expert_kernel": (2, 3, 4)}
    init = {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
    ours = [keras.Variable(init[k], name=k) for k in shapes]
    theirs = [keras.Variable(init[k], name=k) for k in shapes]
    mark_expert_matrix(ours[2])
    # embedding tables get IndexedSlices gradients: one looked up at distinct rows, one with a
    # repeated row. FactorizedAdam densifies them (so a repeated row's gradient is the sum over
    # its look-ups, as in the dense gradient); keras Adam squares each slice before summing
    # duplicates (sum of g_k^2, not (sum of g_k)^2), so for the repeated-row table it is given
    # the dense gradient.
    for name in ("embeddings_unique", "embeddings_repeated"):
        table = rng.normal(size=(10, 4)).astype("float32")
        ours.append(keras.Variable(table, name=name))
        theirs.append(keras.Variable(table, name=name))
    hyper = dict(learning_rate=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-6, **extra)
    opt, ref = FactorizedAdam(**hyper), keras.optimizers.Adam(**hyper)

    def sparse_grads(variables):
        with tf.GradientTape() as tape:
            unique = tf.gather(variables[-2].value, [1, 4, 7])
            repeated = tf.gather(variables[-1].value, [1, 3, 3, 7])
            loss = tf.reduce_sum(unique**2) + tf.reduce_sum(repeated**3)
        return tape.gradient(loss, [variables[-2].value, variables[-1].value])

    for step in range(5):
        grads = [rng.normal(size=shapes[k]).astype("float32") for k in shapes]
        ours_unique, ours_repeated = sparse_grads(ours)
        theirs_unique, theirs_repeated = sparse_grads(theirs)
        assert isinstance(ours_repeated, tf.IndexedSlices)
        opt.apply(grads + [ours_unique, ours_repeated], ours)
        ref.apply(grads + [theirs_unique, tf.convert_to_tensor(theirs_repeated)], theirs)
        for a, b in zip(ours, theirs):
            if "expert" not in a.name:
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)
    # non-vacuous: the weights moved, and the expert matrix did not follow Adam
    assert np.abs(ours[0].numpy() - init["dense_kernel"]).max() > 1e-3
    assert np.abs(ours[2].numpy() - theirs[2].numpy()).max() > 1e-4
    assert opt.uses_factored_state(ours[2]) and not opt.uses_factored_state(ours[0])


def numpy_factored_reference(w, grads, lr, beta_2, eps):
    """Appendix D by hand, in float64: row/col EMAs of g², outer / mean(row), Adam correction."""
    w = w.astype("float64")
    row = np.zeros(w.shape[:-1])
    col = np.zeros(w.shape[:-2] + w.shape[-1:])
    for t, g in enumerate(grads, start=1):
        g = g.astype("float64")
        row = beta_2 * row + (1 - beta_2) * (g**2).mean(axis=-1)
        col = beta_2 * col + (1 - beta_2) * (g**2).mean(axis=-2)
        v_hat = row[..., :, None] * col[..., None, :] / row.mean(axis=-1)[..., None, None]
        v_hat /= 1 - beta_2**t
        w = w - lr * g / (np.sqrt(v_hat) + eps)
    return w, row, col


def test_factored_update_matches_a_hand_computation_over_two_steps():
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(2, 3, 4)).astype("float32")
    grads = [rng.normal(size=(2, 3, 4)).astype("float32") for _ in range(2)]
    var = mark_expert_matrix(keras.Variable(w0, name="expert_kernel_in"))
    # factored_beta_2 differs from beta_2: the expert state must use factored_beta_2
    opt = FactorizedAdam(learning_rate=0.1, beta_2=0.999, factored_beta_2=0.5, epsilon=1e-3)
    for g in grads:
        opt.apply([g], [var])
    want_w, want_row, want_col = numpy_factored_reference(w0, grads, 0.1, 0.5, 1e-3)
    np.testing.assert_allclose(var.numpy(), want_w, rtol=1e-5, atol=1e-6)
    index = opt._get_variable_index(var)
    np.testing.assert_allclose(opt._velocity_rows[index].numpy(), want_row, rtol=1e-5)
    np.testing.assert_allclose(opt._velocity_cols[index].numpy(), want_col, rtol=1e-5)
    # the state is a [2, 3] row vector and a [2, 4] column vector, nothing else
    state = [v for v in opt.variables if not is_counter_variable(opt, v)]
    assert sorted(tuple(v.shape) for v in state) == [(2, 3), (2, 4)]


def test_estimate_is_exact_for_a_rank_one_squared_gradient():
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.1, 2.0, size=(3, 5)), rng.uniform(0.1, 2.0, size=(3, 7))
    squared = a[:, :, None] * b[:, None, :]  # three rank-1 [5, 7] matrices
    row, col = squared.mean(axis=-1), squared.mean(axis=-2)
    np.testing.assert_allclose(np.asarray(factored_second_moment(row, col)), squared, rtol=1e-12)
    # and a zero gradient gives a zero estimate, not NaN
    zero = np.asarray(factored_second_moment(np.zeros((2, 5)), np.zeros((2, 7))))
    assert np.all(zero == 0)

    # through the optimiser: a constant rank-1 gradient keeps the averages rank 1, so every
    # step is lr * g / (|g| + eps), exactly what unfactored Adam with beta_1 = 0 would do
    u, v = rng.normal(size=(2, 5)), rng.normal(size=(2, 7))
    g = (u[:, :, None] * v[:, None, :]).astype("float32")
    var = mark_expert_matrix(keras.Variable(np.zeros((2, 5, 7), "float32"), name="expert_kernel_out"))
    opt = FactorizedAdam(learning_rate=0.01, epsilon=1e-7)
    for step in range(1, 4):
        opt.apply([g], [var])
        np.testing.assert_allclose(var.numpy(), -step * 0.01 * g / (np.abs(g) + 1e-7),
                                   rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------- state and memory


def test_state_bytes_are_rows_plus_columns_per_expert():
    var = mark_expert_matrix(keras.Variable(initializer="zeros", shape=(256, 512, 1024), name="expert_kernel_in"))
    opt = FactorizedAdam()
    opt.build([var])
    assert optimizer_state_bytes(opt) == 256 * (512 + 1024) * 4
    del var, opt
    # a 2-D expert matrix, and the ordinary-Adam count for the rest
    expert2d = mark_expert_matrix(keras.Variable(initializer="zeros", shape=(6, 10), name="expert_w"))
    dense = keras.Variable(initializer="zeros", shape=(6, 10), name="dense_w")
    opt = FactorizedAdam()
    opt.build([expert2d, dense])
    assert optimizer_state_bytes(opt) == (6 + 10) * 4 + 2 * 60 * 4
    adam = keras.optimizers.Adam()
    adam.build([dense])
    assert optimizer_state_bytes(adam) == 2 * 60 * 4


def test_counters_are_recognised_by_their_public_names_only():
    dense = keras.Variable(initializer="zeros", shape=(6, 10), name="dense_w")
    # a variable named like a counter gets slots "iteration_momentum" …, never counted out
    named = keras.Variable(initializer="zeros", shape=(3,), name="iteration")
    opt = FactorizedAdam(gradient_accumulation_steps=2)  # `iterations` is then not the variable
    opt.build([dense, named])
    counters = [v for v in opt.variables if is_counter_variable(opt, v)]
    assert [v.name for v in counters] == ["iteration", "learning_rate"]
    assert counters[0] is opt.variables[0] and counters[1] is opt.learning_rate
    # slots (2 × 60 + 2 × 3) and gradient accumulators (60 + 3), in float32
    assert optimizer_state_bytes(opt) == (2 * 60 + 2 * 3 + 60 + 3) * 4
    # a schedule: no learning-rate variable; an optimiser created inside an outer name scope
    with keras.name_scope("outer"):
        scheduled = keras.optimizers.Adam(
            keras.optimizers.schedules.ExponentialDecay(1e-3, 10, 0.9), name="scheduled")
    scheduled.build([dense])
    assert [v.name for v in scheduled.variables if is_counter_variable(scheduled, v)] == ["iteration"]
    assert optimizer_state_bytes(scheduled) == 2 * 60 * 4


@pytest.mark.parametrize("clip", [{}, {"clipnorm": 1.0}, {"global_clipnorm": 1.0}, {"clipvalue": 0.5}])
def test_apply_densifies_sparse_gradients_only_when_clipping(clip, monkeypatch):
    seen = []
    original = keras.optimizers.Optimizer.apply

    def spy(self, grads, trainable_variables=None):
        seen.extend(type(g).__name__ for g in grads)
        return original(self, grads, trainable_variables)

    monkeypatch.setattr(keras.optimizers.Optimizer, "apply", spy)
    table = keras.Variable(np.ones((8, 2), "float32"), name="embeddings")
    opt = FactorizedAdam(0.1, **clip)
    grad = tf.IndexedSlices(tf.constant([[3.0, 4.0], [3.0, 4.0]]), tf.constant([1, 1]), tf.constant([8, 2]))
    opt.apply([grad], [table])
    assert seen == (["IndexedSlices"] if not clip else ["EagerTensor"])
    assert int(opt.iterations.numpy()) == 1
    # the repeated row's gradient is the sum of its slices, whichever path it took
    moved = np.flatnonzero(np.abs(table.numpy() - 1.0).sum(axis=1))
    assert moved.tolist() == [1]


def test_checkpoint_round_trip_continues_identically(tmp_path):
    x, y = tiny_data()
    model, opt = tiny_model(), FactorizedAdam(learning_rate=0.01)
    for _ in range(3):
        train_step(model, opt, x, y)
    path = tf.train.Checkpoint(model=model, optimizer=opt).save(str(tmp_path / "ckpt"))

    fresh, fresh_opt = tiny_model(seed=7), FactorizedAdam(learning_rate=0.01)
    fresh_opt.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=fresh_opt).restore(path).assert_consumed()
    assert int(fresh_opt.iterations) == 3
    for a, b in zip(opt.variables, fresh_opt.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert any("velocity_row" in v.path for v in fresh_opt.variables)

    for _ in range(2):
        train_step(model, opt, x, y)
        train_step(fresh, fresh_opt, x, y)
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=1e-7)


def test_keras_file_round_trip_keeps_the_optimizer_and_its_state(tmp_path):
    x, y = tiny_data()
    model = tiny_model()
    model.compile(optimizer=FactorizedAdam(learning_rate=0.01, factored_beta_2=0.9), loss="mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.optimizer, FactorizedAdam)
    assert loaded.optimizer.factored_beta_2 == pytest.approx(0.9)
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- keras integration


def test_compile_and_fit_reduces_the_loss():
    x, y = tiny_data(64)
    model = tiny_model()
    model.compile(optimizer=FactorizedAdam(learning_rate=0.02), loss="mse")
    history = model.fit(x, y, batch_size=16, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]
    expert = model.get_layer("moe").expert_kernel
    assert model.optimizer.uses_factored_state(expert)
    assert not model.optimizer.uses_factored_state(model.get_layer("head").kernel)


@keras.saving.register_keras_serializable(package="zoo_test")
def only_kernels(variable):
    return "kernel" in variable.path and len(variable.shape) >= 2


def test_config_round_trip():
    opt = FactorizedAdam(learning_rate=0.02, beta_1=0.5, beta_2=0.99, epsilon=1e-5,
                         factored_beta_2=0.9, global_clipnorm=1.0, name="fadam")
    config = opt.get_config()
    json.dumps(config)
    again = FactorizedAdam.from_config(config)
    assert again.get_config() == config
    assert config["is_factored"] is None and config["global_clipnorm"] == 1.0
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert isinstance(restored, FactorizedAdam) and restored.get_config() == config
    assert FactorizedAdam(beta_2=0.95).factored_beta_2 == pytest.approx(0.95)

    custom = FactorizedAdam(is_factored=only_kernels)
    again = FactorizedAdam.from_config(json.loads(json.dumps(custom.get_config())))
    assert again.is_factored is only_kernels
    kernel = keras.Variable(np.zeros((3, 4), "float32"), name="kernel")
    bias = keras.Variable(np.zeros((4,), "float32"), name="expert_bias")
    again.build([kernel, bias])
    assert again.uses_factored_state(kernel) and not again.uses_factored_state(bias)


def test_default_selection_is_what_the_layer_marked_not_the_name():
    from zoo.layers import SparseMoE
    from zoo.layers.moe_experts import FeedForwardExperts

    assert default_is_factored(mark_expert_matrix(keras.Variable(np.zeros((2, 3, 4)), name="w")))
    # a name alone says nothing: a dense layer's kernel called "expert_..." keeps ordinary Adam
    assert not default_is_factored(keras.Variable(np.zeros((2, 3, 4)), name="expert_kernel_in"))
    assert not default_is_factored(keras.Variable(np.zeros((3, 4)), name="kernel"))

    class Model(keras.Model):  # experts layers under names without "expert": in a mixture, and alone
        def __init__(self):
            super().__init__(name="lm")
            self.mixer = SparseMoE(num_experts=4, k=2, hidden_units=8, name="mixer",
                                   experts=FeedForwardExperts(4, 8, name="bank"))
            self.alone = FeedForwardExperts(2, 6, name="ffn")
            self.out = keras.layers.Dense(3, name="expert_like_dense")

        def call(self, x):
            return self.out(self.mixer(x))

    model = Model()
    model.alone.build((None, 5))  # built, not called: its variables are the model's all the same
    model(np.zeros((2, 5), "float32"))
    factored = sorted(v.path for v in model.trainable_variables if default_is_factored(v))
    assert factored == ["ffn/expert_kernel_in", "ffn/expert_kernel_out",
                        "lm/mixer/bank/expert_kernel_in", "lm/mixer/bank/expert_kernel_out"]
    optimizer = FactorizedAdam()
    optimizer.build(model.trainable_variables)
    assert sorted(v.path for v in model.trainable_variables if optimizer.uses_factored_state(v)) == factored
    # a stacked bias [experts, hidden] is one vector per expert: ordinary Adam, not factored
    assert not default_is_factored(model.mixer.expert_bias_in)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"beta_2": 1.0}, "beta_2"),
        ({"beta_2": -0.1}, "beta_2"),
        ({"beta_1": 1.5}, "beta_1"),
        ({"factored_beta_2": 1.0}, "factored_beta_2"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"is_factored": 3}, "is_factored"),
    ],
)
def test_bad_hyper_parameters_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FactorizedAdam(**kwargs)


def test_is_factored_may_not_pick_a_vector():
    opt = FactorizedAdam(is_factored=lambda v: True)
    with pytest.raises(ValueError, match="rank >= 2"):
        opt.build([keras.Variable(np.zeros((4,), "float32"), name="b")])


# --------------------------------------------------------------------------- distribution

MIRRORED = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from zoo.factorized_adam import FactorizedAdam
    from zoo.layers.moe_dispatch import mark_expert_matrix

    rng = np.random.default_rng(0)
    x = rng.integers(0, 20, size=(16, 5)).astype("int32")
    y = rng.normal(size=(16, 1)).astype("float32")

    class Experts(keras.layers.Layer):
        def build(self, shape):
            self.w = mark_expert_matrix(self.add_weight(name="expert_kernel", shape=(3, shape[-1], 4)))
        def call(self, h):
            return tf.einsum("bi,eio->bo", h, self.w)

    def train(strategy):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            inputs = keras.Input((5,), dtype="int32")
            h = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 6)(inputs))
            out = keras.layers.Dense(1)(keras.layers.Activation("tanh")(Experts()(h)))
            model = keras.Model(inputs, out)
            model.compile(optimizer=FactorizedAdam(0.05), loss="mse")
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat(3)
        model.fit(ds, epochs=1, verbose=0)
        state = [v.numpy().tolist() for v in model.optimizer.variables]
        return [v.numpy().tolist() for v in model.weights], state

    one = train(tf.distribute.OneDeviceStrategy("/cpu:0"))
    two = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    json.dump({"one": one, "two": two}, sys.stdout)
    """
)


@pytest.mark.slow  # a fresh TensorFlow process and two traced fits
def test_mirrored_strategy_matches_one_device():
    # No clipnorm/global_clipnorm here: Keras 3 clips each replica's local gradient before the
    # all-reduce, so clipped training differs between one and two replicas for any optimiser.
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", MIRRORED], capture_output=True, text=True,
                         env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().split("\n")[-1])
    (w_one, s_one), (w_two, s_two) = result["one"], result["two"]
    for a, b in zip(w_one + s_one, w_two + s_two):
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-6)
