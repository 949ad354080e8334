"""The train and eval steps (zoo/training/steps.py) on one device: the eval step sums the weighted
negative log-likelihood, and the train step returns the mean over real tokens and applies it."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.training.steps import step_functions

# Tracing a train or eval step takes several seconds on a CPU: the capability tier.
pytestmark = pytest.mark.ci


def _batch():
    rng = np.random.default_rng(0)
    x = rng.integers(4, 50, size=(2, 6)).astype("int32")
    y = rng.integers(4, 50, size=(2, 6)).astype("int32")
    w = np.ones((2, 6), "float32")
    w[1, 3:] = 0.0  # padding: not scored
    return x, y, w


def test_evaluate_sums_the_nll_of_the_real_tokens_and_counts_them(tiny_model):
    model = tiny_model("gcnn")
    x, y, w = _batch()
    steps = step_functions(model, _sgd(), tf.distribute.get_strategy())
    total, count = steps.evaluate(tuple(tf.constant(a) for a in (x, y, w)))
    log_probs = model.log_probs(x)
    want = -sum(log_probs[i, t, y[i, t]] for i in range(2) for t in range(6) if w[i, t])
    assert float(count) == 9.0 and float(total) == pytest.approx(want, rel=1e-4)


def test_a_train_step_returns_the_mean_loss_and_moves_the_weights(tiny_model):
    model = tiny_model("gcnn")
    x, y, w = _batch()
    steps = step_functions(model, _sgd(), tf.distribute.get_strategy())
    batch = tuple(tf.constant(a) for a in (x, y, w))
    total, count = steps.evaluate(batch)
    before = [v.numpy().copy() for v in model.trainable_variables]
    loss = steps.train(iter([batch]))
    assert float(loss) == pytest.approx(float(total) / float(count), rel=1e-4)  # the tiny models have no dropout
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables))
    assert float(steps.evaluate(batch)[0]) < float(total)


def _sgd():
    import keras

    return keras.optimizers.SGD(0.5)
