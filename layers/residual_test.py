"""Tests of `layers.ResidualBlock`: value, one-token decoding, causality, spec checks."""

import keras
import numpy as np
import pytest

from tests.layer_checks import keras_file_round_trip
from zoo.layers import ResidualBlock, bottleneck_spec
from zoo.layers.gated_conv_test import reference_gated_conv

BOTTLENECK = [[1, 4], [3, 4], [1, 8]]


def _randomise_conv(conv, rng):
    conv.kernel.assign(rng.normal(size=conv.kernel.shape).astype("float32"))
    conv.bias.assign(rng.normal(size=conv.bias.shape).astype("float32") * 0.5)
    if conv.weight_norm:
        conv.g.assign(rng.uniform(0.5, 2.0, size=conv.g.shape).astype("float32"))


def _block(spec, input_dim, activation="glu", seed=0):
    block = ResidualBlock(spec, activation=activation)
    block.build((None, None, input_dim))
    rng = np.random.default_rng(seed)
    for conv in block.convs:
        _randomise_conv(conv, rng)
    if block.projection is not None:
        _randomise_conv(block.projection, rng)
    return block


def _reference(block, x):
    h = np.asarray(x, np.float64)
    for conv in block.convs:
        g = conv.g.numpy() if conv.weight_norm else None
        h = reference_gated_conv(h, conv.kernel.numpy(), conv.bias.numpy(), conv.activation, g)
    if block.projection is None:
        skip = np.asarray(x, np.float64)
    else:
        p = block.projection
        skip = reference_gated_conv(x, p.kernel.numpy(), p.bias.numpy(), "linear",
                                    p.g.numpy() if p.weight_norm else None)
    return skip + h


CASES = [
    pytest.param(BOTTLENECK, 6, True, id="bottleneck-projection"),
    pytest.param([[3, 6], [2, 6]], 6, False, id="identity-skip"),
]


@pytest.mark.parametrize("activation", ["glu", "relu"])
@pytest.mark.parametrize("spec,input_dim,projects", CASES)
def test_values_match_numpy_composition(spec, input_dim, projects, activation):
    block = _block(spec, input_dim, activation)
    assert (block.projection is not None) == projects
    if projects:
        assert block.projection.kernel.shape == (1, input_dim, spec[-1][1])
    x = np.random.default_rng(1).normal(size=(2, 7, input_dim)).astype("float32")
    out = block(x).numpy()
    assert out.shape == (2, 7, spec[-1][1])
    np.testing.assert_allclose(out, _reference(block, x), rtol=1e-5, atol=1e-5)


def test_identity_skip_adds_input_exactly():
    # With every conv's output forced to zero (zero kernel and bias) the block is the identity.
    block = _block([[3, 6], [2, 6]], 6)
    last = block.convs[-1]
    last.kernel.assign(np.zeros(last.kernel.shape, "float32"))
    last.bias.assign(np.zeros(last.bias.shape, "float32"))
    x = np.random.default_rng(2).normal(size=(1, 5, 6)).astype("float32")
    np.testing.assert_array_equal(block(x).numpy(), x)


@pytest.mark.parametrize("spec,input_dim,projects", CASES)
def test_step_matches_call(spec, input_dim, projects):
    block = _block(spec, input_dim)
    x = np.random.default_rng(3).normal(size=(2, 9, input_dim)).astype("float32")
    full = block(x).numpy()
    state = block.initial_state(2, input_dim)
    outs = []
    for t in range(x.shape[1]):
        y, state = block.step(x[:, t, :], state)
        outs.append(y.numpy())
    np.testing.assert_allclose(np.stack(outs, axis=1), full, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spec,input_dim,projects", CASES)
def test_causal(spec, input_dim, projects):
    block = _block(spec, input_dim)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1, 10, input_dim)).astype("float32")
    base = block(x).numpy()
    for t in (0, 4, 7):
        for j in (1, 2):
            perturbed = x.copy()
            perturbed[:, t + j, :] += 3.0
            out = block(perturbed).numpy()
            np.testing.assert_array_equal(out[:, : t + 1], base[:, : t + 1])
            assert not np.allclose(out[:, t + j], base[:, t + j])


def test_bottleneck_spec():
    assert bottleneck_spec(3, 4, 8) == BOTTLENECK


@pytest.mark.parametrize(
    "spec,message",
    [
        ([[1, 4]] * 6, r"1 to 5 \[kernel_size, width\] pairs"),
        ([], r"1 to 5"),
        ([[0, 4]], r"kernel_size must be an integer >= 1, got 0"),
        ([[3, 4], [-1, 4]], r"kernel_size must be an integer >= 1, got -1"),
        ([[3, 0]], r"width must be an integer >= 1, got 0"),
        ([[3, 4, 5]], r"\[kernel_size, width\] pair"),
    ],
)
def test_invalid_specs_raise(spec, message):
    with pytest.raises(ValueError, match=message):
        ResidualBlock(spec)


def test_config_round_trip():
    block = _block(BOTTLENECK, 6)
    config = block.get_config()
    clone = ResidualBlock.from_config(config)
    assert clone.get_config() == config
    clone.build((None, None, 6))
    clone.set_weights(block.get_weights())
    x = np.random.default_rng(5).normal(size=(1, 6, 6)).astype("float32")
    np.testing.assert_array_equal(clone(x).numpy(), block(x).numpy())


def test_keras_model_save_and_load(tmp_path):
    inputs = keras.Input((None, 6))
    block = ResidualBlock(BOTTLENECK, name="block")
    model = keras.Model(inputs, block(inputs))
    rng = np.random.default_rng(6)
    for conv in block.convs + [block.projection]:
        _randomise_conv(conv, rng)
    x = rng.normal(size=(2, 5, 6)).astype("float32")
    assert keras_file_round_trip(model, x, tmp_path).get_layer("block").projection is not None


# ---- fairseq's fconv_lm options: no skip path (residual 0), a scaled sum (√0.5) ----------------
def _fairseq_block(spec, input_dim, seed=0, **options):
    block = ResidualBlock(spec, **options)
    block.build((None, None, input_dim))
    rng = np.random.default_rng(seed)
    for conv in block.convs + ([block.projection] if block.projection is not None else []):
        _randomise_conv(conv, rng)
    return block


@pytest.mark.parametrize("spec,input_dim", [(BOTTLENECK, 6), ([[3, 6], [2, 6]], 6)])
def test_residual_false_is_the_branch_alone_and_has_no_projection(spec, input_dim):
    block = _fairseq_block(spec, input_dim, residual=False)
    assert block.projection is None
    x = np.random.default_rng(4).normal(size=(2, 7, input_dim)).astype("float32")
    h = np.asarray(x, np.float64)
    for conv in block.convs:
        h = reference_gated_conv(h, conv.kernel.numpy(), conv.bias.numpy(), conv.activation, conv.g.numpy())
    np.testing.assert_allclose(block(x).numpy(), h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec,input_dim", [(BOTTLENECK, 6), ([[3, 6], [2, 6]], 6)])
def test_residual_scale_multiplies_the_sum(spec, input_dim):
    block = _fairseq_block(spec, input_dim, residual_scale=0.5 ** 0.5)
    x = np.random.default_rng(5).normal(size=(2, 7, input_dim)).astype("float32")
    np.testing.assert_allclose(block(x).numpy(), _reference(block, x) * 0.5 ** 0.5, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [{"residual": False}, {"residual_scale": 0.5 ** 0.5}])
def test_step_and_prefill_match_call_with_fairseq_options(options):
    block = _fairseq_block(BOTTLENECK, 6, **options)
    x = np.random.default_rng(6).normal(size=(2, 9, 6)).astype("float32")
    full = block(x).numpy()
    state = block.initial_state(2, 6)
    for t in range(9):
        y, state = block.step(x[:, t], state)
        np.testing.assert_allclose(y.numpy(), full[:, t], rtol=1e-5, atol=1e-5)
    prefilled, prefill_state = block.prefill(x, np.array([9, 9]))
    np.testing.assert_allclose(prefilled.numpy(), full, rtol=1e-5, atol=1e-5)
    for a, b in zip(prefill_state, state):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_fairseq_options_round_trip_and_stay_out_of_default_configs(tmp_path):
    assert {"residual", "residual_scale"}.isdisjoint(ResidualBlock(BOTTLENECK).get_config())
    block = _fairseq_block(BOTTLENECK, 6, residual=False, residual_scale=0.5)
    config = block.get_config()
    assert config["residual"] is False and config["residual_scale"] == 0.5
    again = ResidualBlock.from_config(config)
    assert again.residual is False and again.residual_scale == 0.5


@pytest.mark.parametrize("options,match", [
    ({"residual": 0}, "residual must be True or False, got 0"),
    ({"residual_scale": 0}, "residual_scale must be a positive number, got 0"),
    ({"residual_scale": True}, "residual_scale must be a positive number, got True"),
])
def test_bad_fairseq_options_raise_one_clear_error(options, match):
    with pytest.raises(ValueError, match=match):
        ResidualBlock(BOTTLENECK, **options)
