"""Checks shared by the layers' tests (layers/*_test.py import it as `tests.layer_checks`: the
repository root is on `sys.path` under pytest, its conftest.py being there): gradients against
finite differences, and output layers on a tiny distribution. Not part of the installed package."""

import os

import keras
import numpy as np
import tensorflow as tf


def check_gradients(objective, variables, rng, samples=5, eps=1e-6, require_nonzero=True, graph=True):
    """Each variable's tape gradient of `objective()` against central finite differences at
    `samples` random entries (float64 variables). `require_nonzero`: every gradient must be
    nonzero somewhere, so the comparison is not vacuous. `graph`: evaluate the perturbed
    objectives in a tf.function (the same float64 arithmetic, without eager overhead)."""
    with tf.GradientTape() as tape:
        value = objective()
    grads = tape.gradient(value, variables)
    if graph:
        objective = tf.function(objective)
    for var, grad in zip(variables, grads):
        grad = tf.convert_to_tensor(grad).numpy()
        if require_nonzero:
            assert np.abs(grad).max() > 0, var.name
        for _ in range(samples):
            index = tuple(rng.integers(0, s) for s in var.shape)
            original = var.numpy()
            bumped = original.copy()
            bumped[index] += eps
            var.assign(bumped)
            plus = objective().numpy()
            bumped[index] -= 2 * eps
            var.assign(bumped)
            minus = objective().numpy()
            var.assign(original)
            np.testing.assert_allclose(grad[index], (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-8,
                                       err_msg=var.name)


# ---- output layers: built on first use, exact on a tiny distribution --------------------------
FRESH_HIDDEN = np.ones((2, 3, 1), "float32")  # hidden width 1
FRESH_TARGETS = np.array([[0, 1, 2], [3, 3, 0]], "int32")  # vocabulary 4


def first_use(layer, method):
    """Calls the output-layer method `method` of `layer` on the fresh hidden states (and targets)."""
    if method in ("loss", "target_log_prob"):
        return getattr(layer, method)(FRESH_HIDDEN, FRESH_TARGETS)
    return getattr(layer, method)(FRESH_HIDDEN)


def check_output_layer(layer, probabilities, methods):
    """`layer`, whose weights make the next-token distribution `probabilities` (4 ids) for any
    hidden state, gives exactly that distribution through `log_prob`, its NLL through `loss`,
    `-loss` through `target_log_prob` and the likeliest id (3) through `predict`; and calling it
    and every method in `methods` again creates no weight."""
    weights = list(layer.weights)
    expected_nll = -np.log(probabilities)[FRESH_TARGETS]
    log_prob = layer.log_prob(FRESH_HIDDEN).numpy()
    np.testing.assert_allclose(log_prob, np.broadcast_to(np.log(probabilities), (2, 3, 4)), rtol=1e-6)
    read_off = -np.take_along_axis(log_prob, FRESH_TARGETS[..., None], -1)[..., 0]
    np.testing.assert_allclose(read_off, expected_nll, rtol=1e-6)
    np.testing.assert_allclose(layer.loss(FRESH_HIDDEN, FRESH_TARGETS).numpy(), expected_nll, rtol=1e-6)
    np.testing.assert_allclose(-layer.target_log_prob(FRESH_HIDDEN, FRESH_TARGETS).numpy(), expected_nll,
                               rtol=1e-6)
    np.testing.assert_array_equal(layer.predict(FRESH_HIDDEN).numpy(), np.full((2, 3), 3))
    layer(FRESH_HIDDEN)
    for method in methods:
        first_use(layer, method)
    assert len(layer.weights) == len(weights) and all(a is b for a, b in zip(layer.weights, weights))


# ---- saving --------------------------------------------------------------------------------------
def keras_file_round_trip(model, x, directory):
    """`model` saved as a .keras file in `directory` and loaded back, after checking that the
    loaded model gives exactly `model`'s outputs on `x`; returns the loaded model."""
    path = os.path.join(str(directory), "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(restored(x).numpy(), model(x).numpy())
    return restored
