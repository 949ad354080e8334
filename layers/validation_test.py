"""Tests of `zoo.layers.validation`: the shared argument checks and their exact messages."""

import re

import pytest

from zoo.layers.validation import check_int, check_number, is_int


@pytest.mark.parametrize("value, expected", [
    (0, True), (-3, True), (10**20, True),
    (True, False), (False, False), (1.0, False), ("1", False), (None, False),
])
def test_is_int_refuses_bools_and_non_integers(value, expected):
    assert is_int(value) is expected


def _raises(message, fn, *args, **kwargs):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        fn(*args, **kwargs)


def test_check_int_returns_the_value_inside_the_bounds():
    assert check_int("n", 1, minimum=1) == 1
    assert check_int("n", 7) == 7
    assert check_int("k", 4, 1, 4) == 4
    assert check_int("k", 1, 1, 4, bounds="[1, num_experts] = [1, 4]") == 1
    assert check_int("x", -5, maximum=-5) == -5


def test_check_int_minimum_message():
    _raises("kernel_size must be an integer >= 1, got 0.", check_int, "kernel_size", 0, minimum=1)
    _raises("vocabulary_size must be an integer >= 2, got 1.", check_int, "vocabulary_size", 1, minimum=2)
    _raises("max_tokens must be an integer >= 1, got -4.", check_int, "max_tokens", -4, minimum=1)


@pytest.mark.parametrize("value, shown", [(True, "True"), (False, "False"), (2.0, "2.0"), ("3", "'3'"),
                                          (None, "None")])
def test_check_int_refuses_bools_and_non_integers_with_their_repr(value, shown):
    _raises(f"filters must be an integer >= 1, got {shown}.", check_int, "filters", value, minimum=1)
    _raises(f"n must be an integer, got {shown}.", check_int, "n", value)
    _raises(f"k must be an integer in [0, 3], got {shown}.", check_int, "k", value, 0, 3)


def test_check_int_range_and_bounds_messages():
    _raises("k must be an integer in [1, 4], got 5.", check_int, "k", 5, 1, 4)
    _raises("k must be an integer in [1, 4], got 0.", check_int, "k", 0, 1, 4)
    _raises("k must be an integer in [1, num_experts] = [1, 4], got 5.",
            check_int, "k", 5, 1, 4, bounds="[1, num_experts] = [1, 4]")
    _raises("n must be an integer <= 3, got 4.", check_int, "n", 4, maximum=3)
    # bounds replaces the bracket even with one end only
    _raises("n must be an integer in [2, ∞), got 1.", check_int, "n", 1, minimum=2, bounds="[2, ∞)")


def test_check_number():
    assert check_number("w", 0) == 0
    assert check_number("w", 0.5) == 0.5
    assert check_number("factor", 4, minimum=1) == 4
    _raises("load_weight must be a number >= 0, got -0.1.", check_number, "load_weight", -0.1)
    _raises("load_weight must be a number >= 0, got True.", check_number, "load_weight", True)
    _raises("load_weight must be a number >= 0, got '1'.", check_number, "load_weight", "1")
    _raises("factor must be a number >= 1, got 0.5.", check_number, "factor", 0.5, minimum=1)


def test_layer_messages_go_through_the_shared_checks():
    from zoo.layers import AdaptiveSoftmax, FullSoftmax, GatedConv1D, ResidualBlock, SparseMoE

    _raises("kernel_size must be an integer >= 1, got 0.", GatedConv1D, 8, 0)
    _raises("filters must be an integer >= 1, got True.", GatedConv1D, True, 3)
    _raises("vocabulary_size must be an integer >= 2, got True.", FullSoftmax, True)
    _raises("vocabulary_size must be an integer >= 2, got 1.", AdaptiveSoftmax, 1, [1])
    _raises("cutoffs must be integers, got [True, 3].", AdaptiveSoftmax, 10, [True, 3])
    _raises("A layer width must be an integer >= 1, got False.", ResidualBlock, [[3, False]])
    _raises("k must be an integer in [1, num_experts] = [1, 4], got 5.", SparseMoE, 4, 5, 8)
    _raises("k must be an integer in [1, num_experts] = [1, 4], got True.", SparseMoE, 4, True, 8)
    _raises("num_experts must be an integer >= 1, got 0.", SparseMoE, 0, 1, 8)
    _raises("k=(1, 3) does not fit 2 groups of 2 experts: each level's k must be an integer in "
            "[1, experts per group] = [1, 2], got 3.", SparseMoE, 4, (1, 3), 8, groups=2)
    _raises("importance_weight must be a number >= 0, got -1.", SparseMoE, 4, 2, 8, importance_weight=-1)


def test_tf_config_index_message():
    from zoo.distribute import parse_tf_config

    config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": %s}}'
    _raises("TF_CONFIG's task index must be an integer in [0, 1] (job 'worker' has 2 addresses), got 2.",
            parse_tf_config, config % "2")
    _raises("TF_CONFIG's task index must be an integer in [0, 1] (job 'worker' has 2 addresses), got True.",
            parse_tf_config, config % "true")
    assert parse_tf_config(config % "1")["task"]["index"] == 1
