"""Tests of `layers.FeedForward` against a numpy reference: ReLU layers, then a linear layer."""

import keras
import numpy as np
import pytest

from tests.layer_checks import keras_file_round_trip
from zoo.layers import FeedForward


def reference(x, weights):
    """`weights`: (kernel, bias) pairs, bottom first; ReLU after all but the last."""
    x = np.asarray(x, np.float64)
    for i, (kernel, bias) in enumerate(weights):
        x = x @ kernel + bias
        if i < len(weights) - 1:
            x = np.maximum(x, 0.0)
    return x


def _layer(hidden_units, output_units, input_dim, seed=0):
    layer = FeedForward(hidden_units, output_units)
    layer.build((None, None, input_dim))
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return layer


@pytest.mark.parametrize("hidden_units", [[], [7], [5, 4]])
@pytest.mark.parametrize("shape", [(6, 3), (2, 5, 3)])
def test_any_input_rank_follows_the_reference(hidden_units, shape):
    layer = _layer(hidden_units, 2, input_dim=3)
    # kernels and biases bottom first: dense_0 … dense_{n-1}, then the linear output layer
    assert [w.path.split("/")[-2:] for w in layer.weights] == (
        [[f"dense_{i}", name] for i in range(len(hidden_units)) for name in ("kernel", "bias")]
        + [["output", "kernel"], ["output", "bias"]])
    x = np.random.default_rng(1).normal(size=shape).astype("float32")
    got = layer(x).numpy()
    pairs = [(k.numpy(), b.numpy()) for k, b in zip(layer.weights[::2], layer.weights[1::2])]
    assert got.shape == shape[:-1] + (2,)
    np.testing.assert_allclose(got, reference(x, pairs), rtol=1e-5, atol=1e-5)


def test_saved_under_its_registered_name_and_reloaded(tmp_path):
    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, FeedForward([4], 3, name="ffn")(inputs))
    assert keras.saving.get_registered_name(FeedForward) == "zoo>FeedForward"
    x = np.random.default_rng(2).normal(size=(2, 5, 3)).astype("float32")
    restored = keras_file_round_trip(model, x, tmp_path)
    assert isinstance(restored.get_layer("ffn"), FeedForward)


@pytest.mark.parametrize("hidden, output, says", [(8, 3, "hidden_units must be a list"),
                                                  ([8, 0], 3, "each of hidden_units must be an integer >= 1, got 0"),
                                                  ([8], 2.5, "output_units must be an integer >= 1, got 2.5")])
def test_bad_widths_are_one_sentence_naming_the_value(hidden, output, says):
    with pytest.raises(ValueError, match=says):
        FeedForward(hidden, output)
