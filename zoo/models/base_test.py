"""`LanguageModel`, the contract every family keeps: the treebank-sized presets are causal; a
preset directory round-trips (config, weights, vocabulary) and a damaged one is refused naming
what is wrong; `fit` trains with the default optimizer and reports the token-weighted perplexity
that `evaluate` and `perplexity` give; metrics are listed once; `predict` gives `log_probs`; the
Keras file round-trips; `compile` refuses a loss."""

import math
import os

import keras
import numpy as np
import pytest

import zoo
from zoo.data import WordTokenizer
from zoo.data.pipeline import stream_dataset
from zoo.registry import PRESETS

from tests.model_checks import CPU_PRESETS, MOE_EN, MOE_PTB, TABLE_1, TABLE_7, assert_causal, pattern_corpus


# ---- every preset is causal (Table 1's: gcnn_test.py; Table 7's: stack_test.py) -----------------
def test_every_preset_is_tested():
    assert set(zoo.presets()) == set(TABLE_1) | set(CPU_PRESETS) | set(TABLE_7) | set(MOE_PTB) | set(MOE_EN)


@pytest.mark.parametrize("name", ["gcnn-ptb", "gcnn-ptb-deep", "lstm-ptb", "rnn-char", "gcnn-en"])
def test_cpu_presets_are_causal(name):
    model = zoo.load(name, weights="random")
    assert model.get_config()["vocabulary_size"] == PRESETS[name].config["vocabulary_size"]
    assert_causal(model)


# ---- presets on disk ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_save_to_preset_round_trip(tiny_model, word_tokenizer, tiny_lines, tmp_path, kind):
    vocab = word_tokenizer  # built from tiny_lines
    model = tiny_model(kind, tokenizer=vocab)
    directory = model.save_to_preset(str(tmp_path / "preset"))
    assert sorted(os.listdir(directory)) == ["config.json", "model.weights.h5", "vocabulary.txt"]
    keras.utils.set_random_seed(123)  # the reloaded model starts from different random weights
    loaded = zoo.load(directory)
    assert type(loaded) is type(model)
    assert loaded.tokenizer == vocab
    ids = [vocab.encode(line) for line in tiny_lines][0]
    np.testing.assert_array_equal(loaded.log_probs(ids), model.log_probs(ids))
    for a, b in zip(loaded.score(tiny_lines), model.score(tiny_lines)):
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


# ---- training -----------------------------------------------------------------------------
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
