"""Tests of `GCNNLanguageModel`'s options for fairseq's convolutional language models (fconv_lm):
the input projection (`fc1`), blocks without a skip path, the residual scale, a bias-free
adaptive-softmax head and the 2018 adaptive softmax. Each against a numpy composition of the
same weights, and one token at a time against the whole sequence."""

import keras
import numpy as np
import pytest

from zoo.layers.gated_conv_test import reference_gated_conv
from zoo.models import GCNNLanguageModel

# the GBW pattern: a plain block, then bottlenecks (the middle one without a skip path)
BLOCKS = [[[3, 8]], [[1, 4], [3, 4], [1, 8]], [[1, 4], [5, 4], [1, 12]]]
FAIRSEQ = dict(input_projection=True, residual=[True, False, True], residual_scale=0.5 ** 0.5,
               head_bias=False, cutoffs=[10, 20], adaptive_softmax_2018=True)


def fairseq_gcnn(**options):
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=40, embedding_dim=6, blocks=BLOCKS, **options)
    rng = np.random.default_rng(1)
    for w in model.weights:  # away from the initialisers' zeros and norms
        w.assign(rng.normal(0, 0.5, size=w.shape).astype("float32"))
    return model


def _conv(conv, h):
    return reference_gated_conv(h, conv.kernel.numpy(), conv.bias.numpy(), conv.activation, conv.g.numpy())


def reference_hidden(model, ids):
    """The hidden states written out in numpy, fairseq's way: fc1, then each block's convs, the
    skip (projected when the width changes) added and the sum scaled, or no skip at all."""
    h = model.embedding.embeddings.numpy()[ids].astype(np.float64)
    h = _conv(model.input_projection_layer, h)
    for block, residual in zip(model.blocks, model.residual):
        x = h
        for conv in block.convs:
            h = _conv(conv, h)
        if residual:
            skip = x if block.projection is None else _conv(block.projection, x)
            h = (skip + h) * model.residual_scale
    if model.output_projection_layer is not None:
        h = _conv(model.output_projection_layer, h)
    return h


def test_hidden_states_are_fairseqs_composition():
    model = fairseq_gcnn(**FAIRSEQ)
    assert model.input_projection_layer.kernel.shape == (1, 6, 8)
    assert model.blocks[1].projection is None and model.blocks[2].projection.kernel.shape == (1, 8, 12)
    ids = np.random.default_rng(2).integers(0, 40, size=(2, 9))
    np.testing.assert_allclose(model(ids).numpy(), reference_hidden(model, ids), rtol=1e-4, atol=1e-4)


def test_the_output_projection_is_fairseqs_fc2_before_a_full_softmax():
    model = fairseq_gcnn(input_projection=True, output_projection=5)
    assert model.output_projection_layer.kernel.shape == (1, 12, 5) and model.head.kernel.shape == (5, 40)
    ids = np.random.default_rng(4).integers(0, 40, size=(2, 9))
    np.testing.assert_allclose(model(ids).numpy(), reference_hidden(model, ids), rtol=1e-4, atol=1e-4)
    assert model.get_config()["output_projection"] == 5


@pytest.mark.ci
@pytest.mark.parametrize("options", [FAIRSEQ, dict(input_projection=True, output_projection=5)])
def test_one_token_at_a_time_equals_the_whole_sequence(options):
    model = fairseq_gcnn(**options)
    ids = np.random.default_rng(3).integers(0, 40, size=(2, 9))
    full = model.log_probs(ids)
    state = None
    for t in range(ids.shape[1]):
        step, state = model.decode_step(ids[:, t], state)
        np.testing.assert_allclose(step, full[:, t], rtol=1e-4, atol=1e-4)
    # and greedy decoding from a prompt continues with the argmax of the full sequence's last row
    prompt = ids[:1, :4]
    continued = model.generate(prompt, 5, sampler="greedy", stop=None)
    continued = np.asarray(continued)[0]
    for t in range(4, 9):
        assert continued[t] == model.log_probs(continued[None, :t])[0, -1].argmax()


def test_options_round_trip_through_the_config_and_stay_out_of_default_configs():
    default = GCNNLanguageModel(vocabulary_size=40, embedding_dim=6, blocks=BLOCKS, cutoffs=[10]).get_config()
    assert {"input_projection", "output_projection", "residual", "residual_scale", "head_bias",
            "adaptive_softmax_2018"}.isdisjoint(default)
    model = fairseq_gcnn(**FAIRSEQ)
    config = model.get_config()
    assert {k: config[k] for k in FAIRSEQ} == {**FAIRSEQ, "residual_scale": 0.5 ** 0.5}
    again = GCNNLanguageModel.from_config(config)
    again.set_weights(model.get_weights())
    ids = np.arange(12).reshape(2, 6)
    np.testing.assert_array_equal(again.log_probs(ids), model.log_probs(ids))


@pytest.mark.parametrize("options,match", [
    ({"residual": [True, False]}, r"residual must be True, False or a list of 3 booleans \(one per block\), got \[True, False\]"),
    ({"input_projection": 1}, "input_projection must be True or False, got 1"),
    ({"output_projection": 0}, "output_projection must be None or a width >= 1, got 0"),
    ({"head_bias": False}, "head_bias=False and adaptive_softmax_2018=True are options of an adaptive softmax; give cutoffs too"),
    ({"adaptive_softmax_2018": True}, "options of an adaptive softmax"),
])
def test_bad_options_raise_one_clear_error(options, match):
    with pytest.raises(ValueError, match=match):
        GCNNLanguageModel(vocabulary_size=40, embedding_dim=6, blocks=BLOCKS, **options)
