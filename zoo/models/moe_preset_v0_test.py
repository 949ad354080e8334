"""Preset directories with `SparseMoE` layers (flat and hierarchical, in a stack and in a GCNN)
written by `save_to_preset` before the MoE layer was split into router, dispatch and layer
(`zoo/models/testdata/*moe_preset_v0/`, by `tests/write_moe_v0_data.py`) still load with
`zoo.load`, and give the same log-probabilities, training hidden states and MoE losses."""

import numpy as np
import pytest

import zoo
from tests.write_moe_v0_data import PRESET_DIRS, preset_results


@pytest.mark.parametrize("name", sorted(PRESET_DIRS))
def test_a_moe_preset_saved_before_the_split_gives_equal_results(name):
    directory = PRESET_DIRS[name]
    expected = np.load(directory + ".npz")
    results = preset_results(lambda: zoo.load(directory))
    assert sorted(results) == sorted(expected.files)
    for key in expected.files:
        # equal to float32's last bits: the golden values were computed on another CPU, whose
        # matrix-product kernels (oneDNN picks them by the CPU's instruction set) round differently
        if expected[key].dtype.kind == "f":
            np.testing.assert_allclose(results[key], expected[key], rtol=1e-6, atol=1e-6, err_msg=f"{name}: {key}")
        else:
            np.testing.assert_array_equal(results[key], expected[key], err_msg=f"{name}: {key}")
