"""Tests of `zoo.layers.validation`: the shared argument checks, the one sentence each says (the
argument, what it must be and the value given), and that the layers refuse through them."""

import pytest

from zoo.training.distribute import parse_tf_config
from zoo.layers import AdaptiveSoftmax, FullSoftmax, GatedConv1D, ResidualBlock, SparseMoE
from zoo.layers.validation import check_int, check_number, is_int


@pytest.mark.parametrize("value, expected", [
    (0, True), (-3, True), (10**20, True),
    (True, False), (False, False), (1.0, False), ("1", False), (None, False),
])
def test_is_int_refuses_bools_and_non_integers(value, expected):
    assert is_int(value) is expected


def _refused(fn, *args, **kwargs):
    """The message of the `ValueError` `fn(*args, **kwargs)` raises: one sentence on one line."""
    with pytest.raises(ValueError) as error:
        fn(*args, **kwargs)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and message.count(". ") == 0, message
    return message


def _says(message, *parts):
    for part in parts:
        assert part in message, (part, message)


def test_check_int_returns_the_value_inside_the_bounds():
    assert check_int("n", 1, minimum=1) == 1
    assert check_int("n", 7) == 7
    assert check_int("k", 4, 1, 4) == 4
    assert check_int("k", 1, 1, 4, bounds="[1, num_experts] = [1, 4]") == 1
    assert check_int("x", -5, maximum=-5) == -5


@pytest.mark.parametrize("value", [0, -4])
def test_check_int_names_the_argument_its_minimum_and_the_value(value):
    _says(_refused(check_int, "kernel_size", value, minimum=1), "kernel_size", ">= 1", f"got {value}.")


@pytest.mark.parametrize("value, shown", [(True, "True"), (False, "False"), (2.0, "2.0"), ("3", "'3'"),
                                          (None, "None")])
def test_check_int_refuses_bools_and_non_integers_showing_their_repr(value, shown):
    _says(_refused(check_int, "filters", value, minimum=1), "filters", "an integer >= 1", f"got {shown}.")
    _says(_refused(check_int, "n", value), "n must be an integer", f"got {shown}.")
    _says(_refused(check_int, "k", value, 0, 3), "[0, 3]", f"got {shown}.")


@pytest.mark.parametrize("value", [0, 5])
def test_check_int_says_the_range_or_the_bounds_given(value):
    _says(_refused(check_int, "k", value, 1, 4), "k", "[1, 4]", f"got {value}.")
    with_bounds = _refused(check_int, "k", value, 1, 4, bounds="[1, num_experts] = [1, 4]")
    _says(with_bounds, "[1, num_experts] = [1, 4]", f"got {value}.")
    _says(_refused(check_int, "n", 4, maximum=3), "<= 3", "got 4.")
    # bounds replaces the bracket even with one end only
    _says(_refused(check_int, "n", 1, minimum=2, bounds="[2, ∞)"), "[2, ∞)", "got 1.")
    assert ">=" not in _refused(check_int, "n", 1, minimum=2, bounds="[2, ∞)")


def test_check_number():
    assert check_number("w", 0) == 0
    assert check_number("w", 0.5) == 0.5
    assert check_number("factor", 4, minimum=1) == 4
    for value, shown in ((-0.1, "-0.1"), (True, "True"), ("1", "'1'")):
        _says(_refused(check_number, "load_weight", value), "load_weight", "a number >= 0", f"got {shown}.")
    _says(_refused(check_number, "factor", 0.5, minimum=1), "factor", ">= 1", "got 0.5.")


@pytest.mark.parametrize("make, check", [
    (lambda: GatedConv1D(8, 0), lambda: check_int("kernel_size", 0, minimum=1)),
    (lambda: GatedConv1D(True, 3), lambda: check_int("filters", True, minimum=1)),
    (lambda: FullSoftmax(True), lambda: check_int("vocabulary_size", True, minimum=2)),
    (lambda: AdaptiveSoftmax(1, [1]), lambda: check_int("vocabulary_size", 1, minimum=2)),
    (lambda: SparseMoE(4, 5, 8), lambda: check_int("k", 5, 1, 4, bounds="[1, num_experts] = [1, 4]")),
    (lambda: SparseMoE(4, True, 8), lambda: check_int("k", True, 1, 4, bounds="[1, num_experts] = [1, 4]")),
    (lambda: SparseMoE(0, 1, 8), lambda: check_int("num_experts", 0, minimum=1)),
    (lambda: SparseMoE(4, 2, 8, importance_weight=-1), lambda: check_number("importance_weight", -1)),
])
def test_layers_refuse_bad_arguments_through_the_shared_checks(make, check):
    assert _refused(make) == _refused(check)


def test_layer_specific_refusals_name_the_argument_and_the_value():
    _says(_refused(AdaptiveSoftmax, 10, [True, 3]), "cutoffs", "[True, 3]")
    _says(_refused(ResidualBlock, [[3, False]]), "width", "got False.")
    grouped = _refused(SparseMoE, 4, (1, 3), 8, groups=2)
    _says(grouped, "k=(1, 3)", "2 groups of 2 experts", "[1, 2]", "got 3.")


def test_tf_config_index_is_checked_against_the_job_s_addresses():
    config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": %s}}'
    for index, shown in (("2", "2"), ("true", "True")):
        _says(_refused(parse_tf_config, config % index), "task index", "[0, 1]", "'worker' has 2 addresses",
              f"got {shown}.")
    assert parse_tf_config(config % "1")["task"]["index"] == 1
