"""Tests of `layers.GatedConv1D` against a numpy reference of equation (1) of Dauphin et al."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.layer_checks import keras_file_round_trip
from zoo.layers import GatedConv1D

ACTIVATIONS = ("glu", "gtu", "relu", "tanh", "linear", "bilinear")
GATED = {"glu", "gtu", "bilinear"}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_gated_conv(x, kernel, bias, activation, g=None):
    """Causal conv (k-1 zeros on the left) + activation, in float64 numpy.

    `kernel` is [k, in, channels]; with `g` the kernel is weight-normalised, `g * v / ||v||`,
    the norm per output channel over (time, input). Gated activations split the channels
    into W (first half) and the gate V (second half).
    """
    x = np.asarray(x, np.float64)
    kernel = np.asarray(kernel, np.float64)
    if g is not None:
        kernel = kernel * (np.asarray(g, np.float64) / np.sqrt(np.sum(kernel**2, axis=(0, 1))))
    k = kernel.shape[0]
    batch, time, _ = x.shape
    padded = np.concatenate([np.zeros((batch, k - 1, x.shape[2])), x], axis=1)
    z = np.zeros((batch, time, kernel.shape[2]))
    for t in range(time):
        window = padded[:, t : t + k, :]  # inputs t-k+1 .. t
        z[:, t, :] = np.einsum("bki,kio->bo", window, kernel)
    if bias is not None:
        z = z + np.asarray(bias, np.float64)
    if activation in GATED:
        a, gate = np.split(z, 2, axis=-1)
        if activation == "glu":
            return a * _sigmoid(gate)
        if activation == "gtu":
            return np.tanh(a) * _sigmoid(gate)
        return a * gate
    if activation == "relu":
        return np.maximum(z, 0.0)
    if activation == "tanh":
        return np.tanh(z)
    return z


def _randomise(layer, rng):
    """Random kernel, bias and (if any) g, so that every parameter matters in the check."""
    layer.kernel.assign(rng.normal(size=layer.kernel.shape).astype(layer.kernel.dtype))
    if layer.use_bias:
        layer.bias.assign(rng.normal(size=layer.bias.shape).astype(layer.bias.dtype))
    if layer.weight_norm:
        layer.g.assign(rng.uniform(0.5, 2.0, size=layer.g.shape).astype(layer.g.dtype))


def _layer(activation, filters=4, kernel_size=3, input_dim=3, seed=0, **kwargs):
    layer = GatedConv1D(filters, kernel_size, activation=activation, **kwargs)
    layer.build((None, None, input_dim))
    _randomise(layer, np.random.default_rng(seed))
    return layer


def _g(layer):
    return layer.g.numpy() if layer.weight_norm else None


@pytest.mark.parametrize("weight_norm", [True, False])
@pytest.mark.parametrize("kernel_size", [1, 3])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_values_match_numpy_reference(activation, kernel_size, weight_norm):
    layer = _layer(activation, kernel_size=kernel_size, weight_norm=weight_norm)
    channels = 8 if activation in GATED else 4
    assert layer.kernel.shape == (kernel_size, 3, channels)
    x = np.random.default_rng(1).normal(size=(2, 6, 3)).astype("float32")
    expected = reference_gated_conv(x, layer.kernel.numpy(), layer.bias.numpy(), activation, _g(layer))
    out = layer(x)
    assert tuple(out.shape) == (2, 6, 4)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_values_without_bias():
    layer = _layer("glu", use_bias=False)
    assert not any("bias" in w.path for w in layer.weights)
    x = np.random.default_rng(2).normal(size=(1, 5, 3)).astype("float32")
    expected = reference_gated_conv(x, layer.kernel.numpy(), None, "glu", _g(layer))
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-5)


def _finite_difference(f, array, eps=1e-6):
    grad = np.zeros_like(array)
    flat, gflat = array.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        plus = f(array)
        flat[i] = old - eps
        minus = f(array)
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradients_match_finite_differences(activation):
    rng = np.random.default_rng(3)
    layer = GatedConv1D(3, 3, activation=activation, dtype="float64")
    layer.build((None, None, 2))
    _randomise(layer, rng)
    assert layer.kernel.dtype == "float64"
    x = rng.normal(size=(2, 5, 2))
    weights = rng.normal(size=(2, 5, 3))

    def objective(x_value):
        return float(np.sum(layer(x_value).numpy() * weights))

    x_tensor = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_tensor)
        value = tf.reduce_sum(layer(x_tensor) * weights)
    grad_x, grad_kernel = tape.gradient(value, [x_tensor, layer.kernel.value])
    np.testing.assert_allclose(grad_x.numpy(), _finite_difference(objective, x.copy()), rtol=1e-5, atol=1e-8)

    kernel = layer.kernel.numpy().copy()

    def objective_of_kernel(kernel_value):
        layer.kernel.assign(kernel_value)
        return objective(x)

    fd_kernel = _finite_difference(objective_of_kernel, kernel)
    layer.kernel.assign(kernel)
    np.testing.assert_allclose(grad_kernel.numpy(), fd_kernel, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_causal(activation):
    layer = _layer(activation, kernel_size=3)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1, 10, 3)).astype("float32")
    base = layer(x).numpy()
    for t in (0, 3, 7):
        for j in (1, 2):
            perturbed = x.copy()
            perturbed[:, t + j, :] += rng.normal(size=3).astype("float32") * 5
            out = layer(perturbed).numpy()
            np.testing.assert_array_equal(out[:, : t + 1], base[:, : t + 1])
            # and the perturbation is seen at t + j (the test could fail)
            assert not np.allclose(out[:, t + j], base[:, t + j])


@pytest.mark.parametrize("kernel_size", [1, 2, 4])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_step_matches_call(activation, kernel_size):
    layer = _layer(activation, kernel_size=kernel_size)
    x = np.random.default_rng(5).normal(size=(2, 9, 3)).astype("float32")
    full = layer(x).numpy()
    state = layer.initial_state(2)
    assert tuple(state.shape) == (2, kernel_size - 1, 3)
    outs = []
    for t in range(x.shape[1]):
        y, state = layer.step(x[:, t, :], state)
        outs.append(y.numpy())
    np.testing.assert_allclose(np.stack(outs, axis=1), full, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("activation", ["glu", "relu"])
def test_weight_norm_starts_at_raw_kernel(activation):
    layer = GatedConv1D(4, 3, activation=activation, weight_norm=True)
    layer.build((None, None, 5))
    kernel = layer.kernel.numpy()
    np.testing.assert_allclose(layer.g.numpy(), np.sqrt(np.sum(kernel**2, axis=(0, 1))), rtol=1e-6)
    np.testing.assert_allclose(layer.effective_kernel().numpy(), kernel, rtol=1e-6, atol=1e-7)
    # and g really rescales: doubling g doubles the effective kernel
    layer.g.assign(2 * layer.g.numpy())
    np.testing.assert_allclose(layer.effective_kernel().numpy(), 2 * kernel, rtol=1e-6, atol=1e-7)


def test_effective_kernel_is_scale_invariant_in_v():
    layer = _layer("glu", weight_norm=True)
    before = layer.effective_kernel().numpy()
    layer.kernel.assign(3.0 * layer.kernel.numpy())
    np.testing.assert_allclose(layer.effective_kernel().numpy(), before, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kernel_size", [0, -1])
def test_invalid_kernel_size(kernel_size):
    with pytest.raises(ValueError, match=rf"kernel_size must be an integer >= 1, got {kernel_size}"):
        GatedConv1D(4, kernel_size)


def test_unknown_activation():
    with pytest.raises(ValueError, match=r"Unknown activation 'swish'.*glu"):
        GatedConv1D(4, 3, activation="swish")


def test_invalid_filters():
    with pytest.raises(ValueError, match="filters must be an integer >= 1"):
        GatedConv1D(0, 3)


@pytest.mark.parametrize("activation", ["glu", "tanh"])
def test_config_round_trip(activation):
    layer = _layer(activation, kernel_size=2, weight_norm=True, use_bias=True)
    config = layer.get_config()
    clone = GatedConv1D.from_config(config)
    assert clone.get_config() == config
    clone.build((None, None, 3))
    clone.set_weights(layer.get_weights())
    x = np.random.default_rng(6).normal(size=(2, 7, 3)).astype("float32")
    np.testing.assert_array_equal(clone(x).numpy(), layer(x).numpy())


def test_keras_model_save_and_load(tmp_path):
    inputs = keras.Input((None, 3))
    outputs = GatedConv1D(4, 3, activation="glu", name="conv")(inputs)
    model = keras.Model(inputs, outputs)
    _randomise(model.get_layer("conv"), np.random.default_rng(7))
    x = np.random.default_rng(8).normal(size=(2, 6, 3)).astype("float32")
    assert isinstance(keras_file_round_trip(model, x, tmp_path).get_layer("conv"), GatedConv1D)


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_step_and_call_with_the_kernel_computed_once_match_them_without(activation, split):
    """Inside `kernel_computed_once` (a decoding loop's trace) the prompt's pass (`call`) and
    `step` use matrices computed once (a gated layer's values and gates as two products, or one
    with `split_products=False`, as LiteRT's trace asks); they give what the layer gives outside
    it, and the layer forgets them afterwards."""
    layer = _layer(activation, kernel_size=3)
    x = np.random.default_rng(6).normal(size=(2, 7, 3)).astype("float32")
    full = layer(x).numpy()
    with layer.kernel_computed_once(split_products=split):
        assert len(layer._step_matrices) == (2 if layer.gated and split else 1)
        np.testing.assert_array_equal(layer(x).numpy(), full)
        state, outs = layer.initial_state(2), []
        for t in range(x.shape[1]):
            y, state = layer.step(x[:, t, :], state)
            outs.append(y.numpy())
    np.testing.assert_allclose(np.stack(outs, axis=1), full, rtol=1e-6, atol=1e-6)
    assert layer._step_matrices is None and layer._effective_once is None
