"""Files written before the mixture of experts' router and experts became Keras layers of their own
(`zoo/models/testdata/moe_v1/`, by `tests/write_moe_v1_data.py`) still load with equal results: a
training checkpoint (the optimiser's slots, FactorizedAdam's factored ones included, and the
random generators' states, so that the next step is the one an unbroken run takes), a
`.weights.h5` file and an int8 preset directory."""

import os

import numpy as np
import pytest
import tensorflow as tf

import zoo
from tests.write_moe_v0_data import preset_models, token_ids
from tests.write_moe_v1_data import DATA_DIR, NAMES, checkpoint_results, compiled
from zoo.training.checkpoints import training_checkpoint


def assert_close(actual, expected, what):
    # to float32's last bits: the golden values were computed on another CPU (oneDNN's kernels
    # round differently by instruction set)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=2e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)




@pytest.mark.parametrize("name", NAMES)
def test_a_training_checkpoint_written_before_restores_slots_and_random_states(name):
    expected = np.load(os.path.join(DATA_DIR, f"{name}.npz"))
    model = compiled(preset_models()[name])
    step = tf.Variable(0, dtype=tf.int64)
    status = training_checkpoint(model, model.optimizer, step).read(os.path.join(DATA_DIR, f"{name}.ckpt"))
    status.assert_existing_objects_matched()
    results = checkpoint_results(model, int(step.numpy()))
    assert sorted(results) == sorted(k for k in expected.files if k != "int8_log_probs")
    for key in results:
        assert_close(results[key], expected[key], f"{name}: {key}")


@pytest.mark.parametrize("name", NAMES)
def test_weights_and_an_int8_preset_written_before_load_with_equal_log_probs(name):
    expected = np.load(os.path.join(DATA_DIR, f"{name}.npz"))
    model = preset_models()[name]
    model.load_weights(os.path.join(DATA_DIR, f"{name}.weights.h5"))
    assert_close(np.asarray(model.log_probs(token_ids())), expected["log_probs"], f"{name}: weights")
    quantized = zoo.load(os.path.join(DATA_DIR, f"{name}_int8"))
    assert quantized.quantization == "int8"
    assert_close(np.asarray(quantized.log_probs(token_ids())), expected["int8_log_probs"], f"{name}: int8")
