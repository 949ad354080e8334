"""The run's mixed-precision policy and the dtype policy set only while a model is built."""

import keras
import pytest

from zoo.training.precision import dtype_policy, mixed_precision_policy


def test_the_policy_is_none_a_named_one_or_bfloat16_on_a_cpu():
    assert mixed_precision_policy(False) is None
    assert mixed_precision_policy("mixed_float16") == "mixed_float16"
    assert mixed_precision_policy("mixed_bfloat16") == "mixed_bfloat16"
    assert mixed_precision_policy(True) == "mixed_bfloat16"  # the tests see no GPU (conftest.py)


def test_dtype_policy_holds_inside_the_block_only_even_after_an_error():
    before = keras.config.dtype_policy().name
    with dtype_policy("mixed_bfloat16"):
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        assert keras.layers.Dense(2).compute_dtype == "bfloat16"
    assert keras.config.dtype_policy().name == before
    with pytest.raises(RuntimeError):
        with dtype_policy("mixed_float16"):
            raise RuntimeError("while building")
    assert keras.config.dtype_policy().name == before
    with dtype_policy(None):
        assert keras.config.dtype_policy().name == before
