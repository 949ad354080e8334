"""Tests of the zoo's language models: causality of every preset, one-token decoding, presets
on disk, id checks, training, perplexity and generation."""

import gc
import math
import os
import re
import time

import keras
import numpy as np
import pytest

import zoo
from zoo.layers import AdaptiveSoftmax, FullSoftmax
from zoo.data import WordTokenizer
from zoo.data.pipeline import stream_dataset, stream_windows
from zoo.registry import PRESETS

from tests.model_checks import CPU_PRESETS, MOE_PTB, TABLE_1, TABLE_7, assert_causal

SMALL_CUTOFFS = [10, 20, 30]
# The tiny models come from conftest.py's `tiny_model` fixture ("gcnn": three blocks, the last two
# bottlenecks, receptive field 9; "lstm" / "rnn": two recurrent layers of 8, no residual).


# ---- causality of every preset ----------------------------------------------------------
def test_every_preset_is_tested():
    assert set(zoo.presets()) == set(TABLE_1) | set(CPU_PRESETS) | set(TABLE_7) | set(MOE_PTB)


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


@pytest.mark.parametrize("name", ["gcnn-ptb", "gcnn-ptb-deep", "lstm-ptb", "rnn-char", "gcnn-en"])
def test_cpu_presets_are_causal(name):
    model = zoo.load(name, weights="random")
    assert model.get_config()["vocabulary_size"] == PRESETS[name].config["vocabulary_size"]
    assert_causal(model)


# ---- one token at a time ------------------------------------------------------------------
DECODERS = {
    "gcnn-bottleneck": ("gcnn", {}),
    "gcnn-adaptive": ("gcnn", {"blocks": [[[3, 16]], [[1, 4], [3, 4], [1, 16]]], "cutoffs": [10, 30]}),
    "gcnn-tied": ("gcnn", {"blocks": [[[3, 8]], [[2, 8]]], "tie_embeddings": True, "embedding_dropout": 0.3,
                           "dropout": 0.2}),
    "lstm": ("lstm", {}),
    "lstmp": ("lstmp", {}),
    "rnn": ("rnn", {}),
    "moe": ("moe", {}),
}


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_decode_step_matches_log_probs(tiny_model, kind):
    family, overrides = DECODERS[kind]
    model = tiny_model(family, **overrides)
    ids = np.random.default_rng(1).integers(0, 50, size=(2, 40))
    full = model.log_probs(ids)
    state, steps = None, []
    for t in range(ids.shape[1]):
        log_probs, state = model.decode_step(ids[:, t], state)
        steps.append(np.asarray(log_probs))
    np.testing.assert_allclose(np.stack(steps, axis=1), full, rtol=0, atol=1e-5)


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
])
def test_bad_tie_or_embedding_dropout_is_refused(tiny_model, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tiny_model("gcnn", **{"blocks": [[[3, 8]]], **kwargs})


def test_embedding_dropout_acts_in_training_only(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 8]]], embedding_dropout=0.5)
    plain = tiny_model("gcnn", blocks=[[[3, 8]]])  # the same seed: the same weights, no dropout
    ids = np.random.default_rng(4).integers(0, 50, size=(2, 9))
    np.testing.assert_array_equal(model(ids, training=False), plain(ids, training=False))
    assert np.abs(model(ids, training=True).numpy() - model(ids, training=False).numpy()).max() > 1e-3


# ---- presets on disk ------------------------------------------------------------------------
LINES = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "the end"]


@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_save_to_preset_round_trip(tiny_model, tmp_path, kind):
    vocab = WordTokenizer.build(LINES)
    model = tiny_model(kind, tokenizer=vocab)
    directory = model.save_to_preset(str(tmp_path / "preset"))
    assert sorted(os.listdir(directory)) == ["config.json", "model.weights.h5", "vocabulary.txt"]
    keras.utils.set_random_seed(123)  # the reloaded model starts from different random weights
    loaded = zoo.load(directory)
    assert type(loaded) is type(model)
    assert loaded.vocabulary == vocab
    ids = [vocab.encode(line) for line in LINES][0]
    np.testing.assert_array_equal(loaded.log_probs(ids), model.log_probs(ids))
    for a, b in zip(loaded.score(LINES), model.score(LINES)):
        np.testing.assert_array_equal(a, b)
    # saving again over an existing preset replaces it
    model.save_to_preset(directory)
    assert sorted(os.listdir(tmp_path)) == ["preset"]


def test_load_with_weights_argument(tiny_model, tmp_path):
    model = tiny_model("gcnn")
    directory = model.save_to_preset(str(tmp_path / "preset"))
    keras.utils.set_random_seed(7)
    other = zoo.load("gcnn-ptb", weights=directory, vocabulary_size=50, embedding_dim=8,
                     blocks=model.blocks_config, dropout=0.0)
    ids = np.arange(4, 30)
    np.testing.assert_array_equal(other.log_probs(ids), model.log_probs(ids))


def test_preset_directory_without_config(tiny_model, tmp_path):
    directory = tiny_model("gcnn").save_to_preset(str(tmp_path / "preset"))
    os.remove(os.path.join(directory, "config.json"))
    with pytest.raises(ValueError, match=r"has no config\.json"):
        zoo.load(directory)


def test_preset_directory_without_weights(tiny_model, tmp_path):
    directory = tiny_model("gcnn").save_to_preset(str(tmp_path / "preset"))
    os.remove(os.path.join(directory, "model.weights.h5"))
    with pytest.raises(ValueError, match=r"No weights at .*model\.weights\.h5"):
        zoo.load(directory)


def test_preset_directory_with_bad_config(tiny_model, tmp_path):
    directory = tiny_model("gcnn").save_to_preset(str(tmp_path / "preset"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match="not a valid preset config"):
        zoo.load(directory)


def test_unknown_preset_names_closest():
    with pytest.raises(ValueError, match=r"Unknown preset 'gcnn-14x'\. Did you mean 'gcnn-14'"):
        zoo.load("gcnn-14x")


def test_missing_preset_directory(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        zoo.load(str(tmp_path / "nowhere"))


def test_unknown_override():
    with pytest.raises(ValueError, match=r"Unknown config key\(s\) \['nonsense_key'\]"):
        zoo.load("gcnn-ptb", nonsense_key=1)


# ---- id checks ------------------------------------------------------------------------------
@pytest.mark.ci
@pytest.mark.parametrize("bad", [50, -1])
@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_out_of_range_ids_raise(tiny_model, kind, bad):
    model = tiny_model(kind)
    message = rf"Token id {bad} is outside the vocabulary.*\[0, 49\]"
    with pytest.raises(ValueError, match=message):
        model.log_probs([[4, 5, bad, 6]])
    with pytest.raises(ValueError, match=message):
        model.decode_step([bad])
    with pytest.raises(ValueError, match=message):
        model.score([[1, 5, bad, 2]])
    with pytest.raises(ValueError, match=message):
        model.generate([4, bad], max_new_tokens=2)
    with pytest.raises(ValueError, match="must be integers"):
        model.log_probs([[1.5, 2.0]])
    assert model.generate([], max_new_tokens=2, temperature=0)[0] == 1  # an empty prompt starts from <s>
    with pytest.raises(ValueError, match=r"\[batch, time\], got an array of shape \(1, 2, 2\)"):
        model.log_probs([[[4, 5], [6, 7]]])
    # the largest valid id is fine
    assert model.log_probs([[0, 49]]).shape == (1, 2, 50)


# ---- training and perplexity ------------------------------------------------------------
def pattern_corpus(n=30):
    """Line i is five consecutive letters of a cycle starting at letter i: the next letter
    is always determined by the current one."""
    letters = "a b c d e f g h".split()
    return [" ".join(letters[(i + k) % 8] for k in range(5)) for i in range(n)]


@pytest.mark.ci
@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed")
@pytest.mark.parametrize("optimizer", [None, "adam"])
def test_fit_reduces_loss_and_reports_perplexity(tiny_model, optimizer):
    lines = pattern_corpus()
    vocab = WordTokenizer.build(lines)
    model = tiny_model("gcnn", tokenizer=vocab, blocks=[[[3, 8]], [[3, 8]]])
    # seq_len 7 = one line per window: every window scores exactly 6 tokens (its <s> target has
    # weight 0), so the batch-mean loss Keras reports and the token-weighted perplexity agree.
    dataset = stream_dataset(lines, vocab, batch_size=5, seq_len=7)
    for _, _, w in dataset:
        assert w.shape[0] == 5 and float(w.numpy().sum()) == 30.0
    before = model.perplexity(dataset)
    model.compile(optimizer=optimizer) if optimizer else model.compile()
    if optimizer is None:
        assert isinstance(model.optimizer, keras.optimizers.SGD) and model.optimizer.nesterov
    history = model.fit(dataset, epochs=10, verbose=0).history
    assert set(history) >= {"loss", "perplexity"}
    assert history["loss"][-1] < history["loss"][0] - 0.1
    np.testing.assert_allclose(history["perplexity"], np.exp(history["loss"]), rtol=1e-4)
    after = model.perplexity(dataset)
    assert after < before
    # Keras' evaluate reports the same token-weighted perplexity, and its exp(loss)
    evaluated = model.evaluate(dataset, verbose=0, return_dict=True)
    assert evaluated["perplexity"] == pytest.approx(after, rel=1e-5)
    assert math.exp(evaluated["loss"]) == pytest.approx(after, rel=1e-5)


def test_metrics_are_listed_once(tiny_model):
    model = tiny_model("gcnn")
    model.compile()
    # evaluate(return_dict=False) returns one value per name: a duplicate would shift them
    assert model.metrics_names == ["loss", "perplexity"]


def test_predict_returns_log_probs(tiny_model):
    model = tiny_model("gcnn")
    ids = np.random.default_rng(3).integers(0, 50, size=(2, 10)).astype("int32")
    np.testing.assert_array_equal(model.predict(ids, verbose=0), model.log_probs(ids))


@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_keras_file_round_trip(tiny_model, tmp_path, kind):
    model = tiny_model(kind)
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.utils.set_random_seed(99)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    assert restored.get_config() == model.get_config()
    ids = np.arange(4, 24)
    np.testing.assert_array_equal(restored.log_probs(ids), model.log_probs(ids))


def test_compile_rejects_a_loss(tiny_model):
    with pytest.raises(ValueError, match="computes its own loss"):
        tiny_model("gcnn").compile(loss="sparse_categorical_crossentropy")


def _vocab_model(tiny_model, kind="gcnn"):
    lines = pattern_corpus(12) + LINES
    vocab = WordTokenizer.build(lines)
    if kind == "gcnn":
        model = tiny_model("gcnn", tokenizer=vocab, blocks=[[[3, 8]], [[2, 8]]])  # receptive field 4
        assert isinstance(model.head, FullSoftmax)
    elif kind == "gcnn-adaptive":
        model = tiny_model("gcnn", tokenizer=vocab, blocks=[[[3, 16]], [[2, 16]]], cutoffs=[6, 12])
        assert isinstance(model.head, AdaptiveSoftmax)
    else:
        model = tiny_model(kind, tokenizer=vocab)
    return model, lines


@pytest.mark.parametrize("kind", ["gcnn", "gcnn-adaptive", "lstm"])
def test_sentence_perplexity_matches_score(tiny_model, kind):
    model, lines = _vocab_model(tiny_model, kind)
    scores = model.score(lines)
    assert [len(s) for s in scores] == [len(line.split()) + 1 for line in lines]
    expected = math.exp(-sum(float(s.sum()) for s in scores) / sum(len(s) for s in scores))
    got = model.perplexity(lines, mode="sentence", batch_size=3)
    assert got == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("kind", ["gcnn", "gcnn-adaptive"])
def test_score_of_text_equals_log_probs_of_ids(tiny_model, kind):
    model, lines = _vocab_model(tiny_model, kind)
    ids = model.vocabulary.encode(lines[0])
    lp = model.log_probs(ids[:-1])[0]
    expected = lp[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(model.score(lines[0])[0], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(model.score([ids])[0], expected, rtol=1e-6, atol=1e-6)


def test_stream_perplexity_is_exact_for_a_gcnn(tiny_model):
    model, lines = _vocab_model(tiny_model)
    assert model.stream_context == 3
    ids = np.array([i for line in lines for i in model.vocabulary.encode(line)])
    lp = model.log_probs(ids[:-1])[0]
    target_lp = lp[np.arange(len(ids) - 1), ids[1:]]
    scored = ids[1:] != model.vocabulary.bos_id
    expected = math.exp(-target_lp[scored].sum() / scored.sum())
    for seq_len, batch_size in [(5, 3), (16, 2), (200, 1)]:
        got = model.perplexity(lines, mode="stream", batch_size=batch_size, seq_len=seq_len)
        assert got == pytest.approx(expected, rel=1e-5), (seq_len, batch_size)


def test_stream_windows_after_the_first_are_exact_for_a_gcnn(tiny_model):
    """Every target whose left context lies inside the stream gets exactly the whole-stream
    log-probability: the `stream_context` tokens of left context are enough (and needed)."""
    model, lines = _vocab_model(tiny_model)
    vocab = model.vocabulary
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


def test_perplexity_rejects_unknown_mode_and_empty_data(tiny_model):
    model, lines = _vocab_model(tiny_model)
    with pytest.raises(ValueError, match="Unknown mode 'token'"):
        model.perplexity(lines, mode="token")
    with pytest.raises(ValueError, match="empty"):
        model.perplexity([])


# ---- generation ---------------------------------------------------------------------------------
def _greedy_by_hand(model, prompt, max_length):
    state = None
    for token in prompt:
        log_probs, state = model.decode_step([token], state)
    out = []
    for _ in range(max_length):
        lp = np.asarray(log_probs)[0].astype("float64")
        lp[:2] = -np.inf  # <pad> and <s> are never generated
        token = int(np.argmax(lp))
        out.append(token)
        log_probs, state = model.decode_step([token], state)
    return list(prompt) + out


@pytest.mark.ci
@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_greedy_generation(tiny_model, kind):
    model = tiny_model(kind)
    prompt = [1, 7, 12, 30]
    greedy = model.generate(prompt, max_new_tokens=12, temperature=0)
    assert len(greedy) == len(prompt) + 12
    assert greedy == _greedy_by_hand(model, prompt, 12)
    assert model.generate(prompt, max_new_tokens=12, temperature=0, seed=5) == greedy
    for seed in (0, 1):
        assert model.generate(prompt, max_new_tokens=12, temperature=1.0, top_k=1, seed=seed) == greedy


@pytest.mark.ci
def test_sampling_is_seeded(tiny_model):
    model = tiny_model("gcnn")
    a = model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=3)
    assert a == model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=3)
    others = [model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=s) for s in range(4, 8)]
    assert any(o != a for o in others)
    assert all(t not in (0, 1) for t in a[2:])


def test_text_generation_stops_at_end_of_sentence(tiny_model):
    model, _ = _vocab_model(tiny_model)
    vocab = model.vocabulary
    text = model.generate("a b", max_new_tokens=25, temperature=0)
    ids = _greedy_by_hand(model, vocab.encode("a b", add_eos=False), 25)
    if vocab.eos_id in ids[3:]:
        ids = ids[: ids.index(vocab.eos_id, 3) + 1]
    assert text == vocab.decode(ids)
    assert text.startswith("a b")


def test_generate_rejects_bad_arguments(tiny_model):
    model = tiny_model("gcnn")
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        model.generate([1], temperature=-1)
    with pytest.raises(ValueError, match=r"top_k must be in \[1, 50\]"):
        model.generate([1], top_k=0)
