"""Tests of `layers.FullSoftmax` and the output-layer interface it defines."""

import keras
import numpy as np
import pytest

from zoo.layers import FullSoftmax, TiedSoftmax
from tests.layer_checks import check_output_layer, first_use

VOCAB = 50


def _head(dtype=None, seed=0):
    head = FullSoftmax(VOCAB, dtype=dtype) if dtype else FullSoftmax(VOCAB)
    head.build((None, None, 8))
    rng = np.random.default_rng(seed)
    head.kernel.assign(rng.normal(size=(8, VOCAB)).astype("float32"))
    head.bias.assign(rng.normal(size=(VOCAB,)).astype("float32"))
    return head


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(2, 5, 8)).astype("float32")
    targets = rng.integers(0, VOCAB, size=(2, 5)).astype("int32")
    return hidden, targets


def _reference_log_prob(head, hidden):
    logits = hidden.astype(np.float64) @ head.kernel.numpy().astype(np.float64) + head.bias.numpy()
    logits -= logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def test_log_prob_is_normalised_and_exact():
    head = _head()
    hidden, _ = _inputs()
    log_prob = head.log_prob(hidden).numpy()
    assert log_prob.shape == (2, 5, VOCAB)
    np.testing.assert_allclose(np.exp(log_prob).sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(log_prob, _reference_log_prob(head, hidden), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(head(hidden).numpy(), log_prob)


def test_loss_is_negative_gathered_log_prob():
    head = _head()
    hidden, targets = _inputs()
    log_prob = head.log_prob(hidden).numpy()
    gathered = np.take_along_axis(log_prob, targets[..., None], axis=-1)[..., 0]
    loss = head.loss(hidden, targets).numpy()
    assert loss.shape == (2, 5)
    np.testing.assert_allclose(loss, -gathered, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(head.target_log_prob(hidden, targets).numpy(), -loss, rtol=0, atol=0)


def test_predict_is_argmax():
    head = _head()
    hidden, _ = _inputs()
    predicted = head.predict(hidden).numpy()
    np.testing.assert_array_equal(predicted, np.argmax(_reference_log_prob(head, hidden), axis=-1))
    # the argmax is not trivially constant across positions
    assert len(np.unique(predicted)) > 1


def test_mixed_bfloat16_outputs_float32():
    head = _head(dtype="mixed_bfloat16")
    assert head.compute_dtype == "bfloat16"
    assert head.kernel.dtype == "float32"
    hidden, targets = _inputs()
    hidden_bf16 = keras.ops.cast(hidden, "bfloat16")
    log_prob = head.log_prob(hidden_bf16)
    assert keras.backend.standardize_dtype(log_prob.dtype) == "float32"
    assert keras.backend.standardize_dtype(head.loss(hidden_bf16, targets).dtype) == "float32"
    assert keras.backend.standardize_dtype(head(hidden_bf16).dtype) == "float32"
    np.testing.assert_allclose(np.exp(log_prob.numpy()).sum(-1), 1.0, atol=1e-5)
    # bfloat16 logits, but still close to the float32 answer
    np.testing.assert_allclose(log_prob.numpy(), _reference_log_prob(head, hidden), atol=0.3)


def test_mixed_precision_global_policy():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        head = FullSoftmax(VOCAB)
        head.build((None, 8))
        hidden = keras.ops.cast(np.ones((3, 8), "float32"), "bfloat16")
        out = head.log_prob(hidden)
    finally:
        keras.config.set_dtype_policy(previous)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(np.exp(out.numpy()).sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("bad", [1, 0, 2.5, True])
def test_invalid_vocabulary_size(bad):
    with pytest.raises(ValueError, match="vocabulary_size must be an integer >= 2"):
        FullSoftmax(bad)


def test_config_round_trip():
    head = _head()
    clone = FullSoftmax.from_config(head.get_config())
    assert clone.vocabulary_size == VOCAB
    clone.build((None, None, 8))
    clone.set_weights(head.get_weights())
    hidden, _ = _inputs()
    np.testing.assert_array_equal(clone.log_prob(hidden).numpy(), head.log_prob(hidden).numpy())


def test_float64_layer_keeps_float64():
    head = FullSoftmax(VOCAB, dtype="float64")
    head.build((None, 8))
    hidden = np.random.default_rng(2).normal(size=(3, 8))
    log_prob = head.log_prob(hidden)
    assert keras.backend.standardize_dtype(log_prob.dtype) == "float64"
    np.testing.assert_allclose(np.exp(log_prob.numpy()).sum(-1), 1.0, atol=1e-12)


# ---- a fresh layer: every method builds it on first use ----------------------------------------
FRESH_P = np.array([0.1, 0.2, 0.3, 0.4])  # kernel 0, bias log(FRESH_P): p is FRESH_P for any hidden


@pytest.mark.parametrize("method", ["logits", "log_prob", "loss", "target_log_prob", "predict"])
def test_every_method_builds_a_fresh_layer_once_and_is_exact(method):
    head = FullSoftmax(4)
    assert not head.built
    out = first_use(head, method)  # no AttributeError: the layer builds from hidden's last axis
    assert head.built
    assert [tuple(w.shape) for w in head.weights] == [(1, 4), (4,)]
    assert tuple(out.shape) == {"logits": (2, 3, 4), "log_prob": (2, 3, 4), "predict": (2, 3)}.get(method, (2, 3))
    head.kernel.assign(np.zeros((1, 4), "float32"))
    head.bias.assign(np.log(FRESH_P).astype("float32"))

    check_output_layer(head, FRESH_P, ("logits", "log_prob", "loss", "target_log_prob", "predict"))
    np.testing.assert_allclose(head.bias.numpy(), np.log(FRESH_P), rtol=1e-6)


def test_a_fresh_layer_needs_a_known_last_axis():
    import tensorflow as tf

    head = FullSoftmax(4)
    fn = tf.function(head.log_prob, input_signature=[tf.TensorSpec([None, None, None], tf.float32)])
    with pytest.raises(ValueError, match="last axis of the hidden states, which must be known"):
        fn.get_concrete_function()


@pytest.mark.parametrize("blocks", [1, 3, 4, VOCAB, VOCAB + 7])
def test_logits_in_blocks_of_ids_equal_the_one_product(blocks):
    """`blocks_computed_once` (a decoding loop's output layer at a few rows): the kernel and bias
    cut into blocks of consecutive ids, one product per block; the logits are the same, and the
    layer computes as before once the context ends."""
    head = _head()
    hidden, _ = _inputs()
    hidden = hidden[:, 0, :]
    whole = head.logits(hidden).numpy()
    with head.blocks_computed_once(blocks):
        parts = head._blocks_once
        assert len(parts) == min(blocks, VOCAB) and sum(k.shape[1] for k, _, _ in parts) == VOCAB
        np.testing.assert_allclose(head.logits(hidden).numpy(), whole, rtol=1e-6, atol=1e-6)
    assert head._blocks_once is None
    np.testing.assert_array_equal(head.logits(hidden).numpy(), whole)


@pytest.mark.parametrize("cache_bytes, blocks", [(8 * 4 * VOCAB, 1), (8 * 4 * 10, 5), (8 * 4 * 10 + 31, 5),
                                                  (8 * 4 * 9, 6), (8 * 2 * 10, 10), (1, VOCAB)])
def test_blocks_to_fit_a_cache_are_the_fewest_whose_matrix_fits(cache_bytes, blocks):
    """`blocks_to_fit`: the 8 × 50 float32 matrix (32 bytes per id) in the fewest blocks of at most
    `cache_bytes` each; at least one id per block."""
    assert _head().blocks_to_fit(cache_bytes) == blocks


def test_a_float64_layer_counts_eight_bytes_a_value():
    assert _head("float64").blocks_to_fit(8 * 8 * 10) == 5


def test_a_tied_layer_fits_its_blocks_by_the_embedding_width():
    embeddings = np.zeros((VOCAB, 6), "float32")
    head = TiedSoftmax(VOCAB, embeddings=lambda: embeddings)
    head.build((None, None, 6))
    assert head.blocks_to_fit(6 * 4 * 25) == 2 and head.blocks_to_fit(6 * 4 * 24) == 3
