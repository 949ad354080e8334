"""`GCNNLanguageModel`: Table 1's presets (and gcnn-14 at full size) are causal; the receptive
field is what its kernels give, and `stream_context` tokens of left context make every windowed
log-probability exact; a tied output layer is the embedding transposed (and survives a round
trip); bad tie or embedding-dropout settings are refused; embedding dropout acts in training only."""

import gc
import re
import time

import numpy as np
import pytest

import zoo
from zoo.data import WordTokenizer
from zoo.data.pipeline import stream_windows
from zoo.layers import AdaptiveSoftmax
from zoo.registry import PRESETS

from tests.model_checks import TABLE_1, assert_causal, vocab_model

SMALL_CUTOFFS = [10, 20, 30]


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.ci) if name in ("gcnn-13", "gcnn-14b") else name
                                  for name in TABLE_1])  # ci: the two largest take the longest to build
@pytest.mark.ci
def test_table_1_presets_are_causal(name):
    # Table 1's cutoffs (4k-200k) do not fit a vocabulary of 50: three small clusters instead,
    # so the adaptive softmax's head and tails are exercised too.
    model = zoo.load(name, vocabulary_size=50, cutoffs=SMALL_CUTOFFS)
    spec = PRESETS[name].config
    assert isinstance(model.head, AdaptiveSoftmax) and model.head.cutoffs == SMALL_CUTOFFS
    assert model.blocks_config == spec["blocks"]
    assert model.embedding_dim == spec["embedding_dim"]
    assert_causal(model)
    del model
    gc.collect()


@pytest.mark.ci  # builds the 223M-parameter model
def test_gcnn_14_full_size_is_causal():
    start = time.perf_counter()
    model = zoo.load("gcnn-14")
    assert model.vocabulary_size == 267_735
    assert isinstance(model.head, AdaptiveSoftmax)
    assert model.head.cutoffs == PRESETS["gcnn-14"].config["cutoffs"]
    assert model.blocks_config == PRESETS["gcnn-14"].config["blocks"]
    assert_causal(model)
    elapsed = time.perf_counter() - start
    print(f"gcnn-14 (full size, {model.count_params():,} parameters): {elapsed:.1f} s")
    del model
    gc.collect()


def test_gcnn_receptive_field(tiny_model):
    model = tiny_model("gcnn")
    assert model.receptive_field == 1 + 2 + 2 + 4
    assert model.stream_context == model.receptive_field - 1
    # token t - 8 still matters at t, token t - 9 does not
    ids = np.tile(np.random.default_rng(2).integers(4, 50, size=20), (3, 1))
    ids[1, 19 - 8] = (ids[0, 19 - 8] + 1 - 4) % 46 + 4
    ids[2, 19 - 9] = (ids[0, 19 - 9] + 1 - 4) % 46 + 4
    lp = model.log_probs(ids)
    assert np.abs(lp[1, 19] - lp[0, 19]).max() > 1e-6
    np.testing.assert_allclose(lp[2, 19], lp[0, 19], rtol=0, atol=1e-6)


def test_stream_windows_after_the_first_are_exact_for_a_gcnn(tiny_model, tiny_lines):
    """Every target whose left context lies inside the stream gets exactly the whole-stream
    log-probability: the `stream_context` tokens of left context are enough (and needed)."""
    model, lines = vocab_model(tiny_model, tiny_lines)
    vocab = model.tokenizer
    ids = np.array([i for line in lines for i in vocab.encode(line)])
    lp = model.log_probs(ids[:-1])[0]
    full = lp[np.arange(len(ids) - 1), ids[1:]]
    context = model.stream_context
    for window_context, exact in [(context, True), (context - 1, False)]:
        x, y, w = stream_windows(ids, 5, window_context, vocab.bos_id)
        windowed = np.take_along_axis(model.log_probs(x), y[..., None], axis=-1)[..., 0]
        got = windowed[w > 0]
        want = full[ids[1:] != vocab.bos_id]
        assert got.shape == want.shape
        # skip the first `context` targets of the stream: their left context is <pad> tokens
        tail = slice(context, None)
        assert np.allclose(got[tail], want[tail], rtol=0, atol=1e-5) == exact, window_context


def test_tied_output_layer_is_the_embedding_transposed(tiny_model, tmp_path):
    words = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)])
    model = tiny_model("gcnn", tokenizer=words, blocks=[[[3, 8]], [[2, 8]]], tie_embeddings=True)
    assert [w.path.split("/")[-2:] for w in model.head.weights] == [["head", "bias"]]
    assert model.count_params() == tiny_model("gcnn", blocks=[[[3, 8]], [[2, 8]]]).count_params() - 8 * 50
    model.head.bias.assign(np.linspace(-1, 1, 50).astype("float32"))
    ids = np.random.default_rng(3).integers(0, 50, size=(2, 7))
    hidden = model(ids).numpy()
    logits = hidden @ model.embedding.embeddings.numpy().T + model.head.bias.numpy()
    expected = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(model.log_probs(ids), expected, rtol=0, atol=1e-5)
    # one variable trained by both uses: the gradient is the sum of the lookup's and the output layer's
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model.head.loss(model(ids), ids))
    grad = tf.convert_to_tensor(tape.gradient(loss, model.embedding.embeddings))
    unused = sorted(set(range(50)) - set(ids.ravel()))
    assert np.abs(grad.numpy()[unused]).max() > 0  # the output layer reaches every row
    # the round trip keeps the tie (the reloaded head still reads the reloaded embedding)
    loaded = zoo.load(model.save_to_preset(str(tmp_path / "tied")))
    assert loaded.tie_embeddings and loaded.head.weights == [loaded.head.bias]
    np.testing.assert_array_equal(loaded.log_probs(ids), model.log_probs(ids))
    loaded.embedding.embeddings.assign(loaded.embedding.embeddings * 2)
    assert np.abs(loaded.log_probs(ids) - model.log_probs(ids)).max() > 1e-3


@pytest.mark.parametrize("kwargs, message", [
    ({"tie_embeddings": True, "cutoffs": [10, 30]}, "Set cutoffs=None to tie"),
    ({"tie_embeddings": True, "blocks": [[[3, 16]]]}, "last block's width (16) to equal embedding_dim (8)"),
    ({"tie_embeddings": "yes"}, "tie_embeddings must be True or False, got 'yes'"),
    ({"embedding_dropout": 1.0}, "embedding_dropout must be a rate in [0, 1), got 1.0"),
    # before: a TypeError from deep inside (what `zoo train --set blocks=2` printed as a traceback)
    ({"blocks": 2}, "blocks must be a list of residual blocks, each a list of [kernel_size, width] pairs "
                    "(e.g. [[[4, 128]], [[4, 128]]]), got 2."),
    ({"dropout": "a"}, "dropout must be a rate in [0, 1), got 'a'."),
    ({"embedding_dim": 0}, "embedding_dim must be an integer >= 1, got 0."),
])
def test_bad_tie_or_embedding_dropout_is_refused(tiny_model, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tiny_model("gcnn", **{"blocks": [[[3, 8]]], **kwargs})
    if "tie_embeddings" not in kwargs:
        with pytest.raises(ValueError, match=re.escape(message)):  # as zoo.load's keyword arguments
            zoo.load("gcnn-ptb", **kwargs)


def test_embedding_dropout_acts_in_training_only(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 8]]], embedding_dropout=0.5)
    plain = tiny_model("gcnn", blocks=[[[3, 8]]])  # the same seed: the same weights, no dropout
    ids = np.random.default_rng(4).integers(0, 50, size=(2, 9))
    np.testing.assert_array_equal(model(ids, training=False), plain(ids, training=False))
    assert np.abs(model(ids, training=True).numpy() - model(ids, training=False).numpy()).max() > 1e-3


# ---- a dense feed-forward branch (the mixture of experts' dense twin) ---------------------------
def test_feed_forward_branch_adds_its_output_to_the_blocks_and_round_trips(tiny_model, tmp_path):
    blocks = [[[3, 8]], [[2, 8]]]
    plain = tiny_model("gcnn", blocks=blocks)
    twin = tiny_model("gcnn", blocks=blocks, feed_forward={"after_blocks": [0], "hidden_units": 16})
    assert twin.count_params() - plain.count_params() == 8 * 16 + 16 + 16 * 8 + 8
    for layer in (plain.embedding, *plain.blocks, plain.head):  # the twin's other weights are the plain model's
        twin.get_layer(layer.name).set_weights(layer.get_weights())
    ids = np.random.default_rng(0).integers(4, plain.vocabulary_size, size=(2, 9))
    assert np.abs(twin.log_probs(ids) - plain.log_probs(ids)).max() > 1e-4
    ffn = twin.feed_forward_layers[0]
    ffn.dense[-1].set_weights([np.zeros_like(w) for w in ffn.dense[-1].get_weights()])  # FFN(x) = 0
    np.testing.assert_allclose(twin.log_probs(ids), plain.log_probs(ids), atol=1e-6)
    assert_causal(tiny_model("gcnn", blocks=blocks, feed_forward={"after_blocks": [1], "hidden_units": 4}))
    twin.save_to_preset(str(tmp_path / "twin"))
    again = zoo.load(str(tmp_path / "twin"))
    assert again.get_config()["feed_forward"] == {"after_blocks": [0], "hidden_units": 16}
    np.testing.assert_allclose(again.log_probs(ids), twin.log_probs(ids), atol=1e-6)
    assert "feed_forward" not in plain.get_config()  # every other preset's config stays as it was


@pytest.mark.parametrize("overrides, message", [
    ({"feed_forward": {"after_blocks": [0]}}, r'feed_forward must be None or a dict \{"after_blocks"'),
    ({"feed_forward": {"after_blocks": [0], "hidden_units": 0}}, "feed_forward hidden_units must be an integer >= 1"),
    ({"feed_forward": {"after_blocks": [5], "hidden_units": 4}}, r"feed_forward after_blocks must be block indices in \[0, 1\], got 5"),
    ({"feed_forward": {"after_blocks": [1, 1], "hidden_units": 4}}, "names a block twice"),
    ({"feed_forward": {"after_blocks": [0], "hidden_units": 4},
      "moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 4}}, "Block 0 is followed by a mixture"),
])
def test_bad_feed_forward_is_one_sentence(tiny_model, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_model("gcnn", blocks=[[[3, 8]], [[2, 8]]], **overrides)
