"""The shared fixtures of conftest.py build what they say."""

import os

import numpy as np
import pytest

from zoo.models import GCNNLanguageModel, StackLanguageModel


@pytest.mark.parametrize("family, cls, kinds", [
    ("gcnn", GCNNLanguageModel, None),
    ("lstm", StackLanguageModel, ["lstm", "lstm"]),
    ("lstmp", StackLanguageModel, ["lstm"]),
    ("rnn", StackLanguageModel, ["rnn", "rnn"]),
    ("moe", StackLanguageModel, ["lstm", "moe", "lstm"]),
])
def test_tiny_model_of_each_family_is_seeded_and_small(tiny_model, family, cls, kinds):
    model = tiny_model(family)
    assert type(model) is cls and model.vocabulary_size == 50 and model.embedding_dim == 8
    if kinds is not None:
        assert [s["type"] for s in model.layer_specs] == kinds
    ids = np.arange(4, 14)[None]
    # a second call gives a new model with the same weights; another seed, other weights
    np.testing.assert_array_equal(tiny_model(family).log_probs(ids), model.log_probs(ids))
    assert np.abs(tiny_model(family, seed=1).log_probs(ids) - model.log_probs(ids)).max() > 1e-6


def test_tiny_model_takes_overrides_and_a_tokenizer(tiny_model, word_tokenizer, tiny_lines):
    model = tiny_model("gcnn", tokenizer=word_tokenizer, blocks=[[[3, 8]]], cutoffs=[6])
    assert model.vocabulary_size == len(word_tokenizer) == 4 + len({w for line in tiny_lines for w in line.split()})
    assert model.blocks_config == [[[3, 8]]]
    assert [len(s) for s in model.score(tiny_lines)] == [len(line.split()) + 1 for line in tiny_lines]
    with pytest.raises(ValueError, match="Unknown tiny model family 'gru'"):
        tiny_model("gru")


def test_tiny_corpus_has_three_splits_of_the_tiny_lines(tiny_corpus, tiny_lines):
    assert sorted(os.listdir(tiny_corpus)) == ["test.txt", "train.txt", "valid.txt"]
    for split in ("train", "valid", "test"):
        with open(os.path.join(tiny_corpus, f"{split}.txt")) as f:
            lines = f.read().splitlines()
        assert lines and set(lines) <= set(tiny_lines), split
