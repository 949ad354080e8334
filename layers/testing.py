"""Test helpers shared by the layers' tests."""

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
