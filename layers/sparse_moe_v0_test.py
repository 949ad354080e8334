"""Files written by `SparseMoE` before it was split into router, dispatch and layer (commit of
`layers/testdata/sparse_moe_v0/`, by `tests/write_moe_v0_data.py`) still load, and the loaded
layers give the same outputs, gates, Importance, Load, losses, gradients and seeded noise draws."""

import json
import os

import keras
import numpy as np
import pytest

from tests.write_moe_v0_data import LAYER_DIR, LAYERS, layer_inputs, layer_results, seeded_layer_results
from zoo.layers import SparseMoE

EXPECTED = np.load(os.path.join(LAYER_DIR, "expected.npz"))


def assert_equal(actual, expected, what):
    """Equal, a float array to float32's last bits: the golden values were computed on another
    CPU, whose matrix-product kernels (oneDNN picks them by the CPU's instruction set) round
    differently."""
    if np.asarray(expected).dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def assert_results_equal(name, results):
    keys = sorted(k.split("/", 1)[1] for k in EXPECTED.files if k.startswith(name + "/"))
    assert sorted(results) == keys
    for key in keys:
        assert_equal(results[key], EXPECTED[f"{name}/{key}"], f"{name}/{key}")


def from_json(name):
    """The bare layer from its serialised config and `.weights.h5`."""
    with open(os.path.join(LAYER_DIR, f"{name}.json")) as f:
        layer = keras.saving.deserialize_keras_object(json.load(f))
    assert layer.built  # the serialised config holds the build config
    keras.saving.load_weights(layer, os.path.join(LAYER_DIR, f"{name}.weights.h5"))
    return layer


@pytest.mark.parametrize("name", list(LAYERS))
def test_a_layer_saved_before_the_split_gives_equal_results(name):
    x, noise, weights = layer_inputs()
    model = keras.models.load_model(os.path.join(LAYER_DIR, f"{name}.keras"))
    layer = model.layers[-1]
    assert isinstance(layer, SparseMoE) and layer.name == f"moe_{name}"
    results = layer_results(layer, x, noise[name], weights[name])
    results.update(seeded_layer_results(lambda: from_json(name), x))
    assert_results_equal(name, results)


@pytest.mark.parametrize("name", list(LAYERS))
def test_a_bare_layer_config_and_weights_saved_before_the_split_load(name):
    x, noise, weights = layer_inputs()
    layer = from_json(name)
    assert layer.get_config() == dict(keras.models.load_model(
        os.path.join(LAYER_DIR, f"{name}.keras")).layers[-1].get_config())
    results = layer_results(layer, x, noise[name], weights[name])
    expected_keys = [k for k in EXPECTED.files if k.startswith(name + "/") and "seeded" not in k]
    for key in expected_keys:
        assert_equal(results[key.split("/", 1)[1]], EXPECTED[key], key)
