"""Fixtures shared by every test: tiny models of each family, tiny corpora and a word tokenizer.

A test asks for them by name (`def test_x(tiny_model, tiny_lines): ...`). The models are built
fresh for each call (they are mutable: a test may train or reassign them) from a fixed seed, so
two calls with the same arguments give the same weights and a test may assert exact numbers.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

# The smallest model of each family a test needs: vocabulary 50, width 8. "gcnn" has a plain GLU
# block and two bottleneck blocks (1x1 down, k, 1x1 up, kernels 3 and 5: receptive field 9), so
# the residual projection and the bottleneck are both exercised.
TINY_FAMILIES = {
    "gcnn": ("GCNNLanguageModel",
             {"embedding_dim": 8, "blocks": [[[3, 8]], [[1, 4], [3, 4], [1, 8]], [[1, 4], [5, 4], [1, 12]]]}),
    # two recurrent layers of 8 without residual connections: lstm-ptb's shape
    "lstm": ("StackLanguageModel",
             {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 8}] * 2, "residual": False}),
    "rnn": ("StackLanguageModel",
            {"embedding_dim": 8, "layers": [{"type": "rnn", "units": 8}] * 2, "residual": False}),
    # one LSTM of 16 units projected to 8: lstmp-ptb's shape
    "lstmp": ("StackLanguageModel",
              {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 16, "projection": 8}], "residual": False}),
    # LSTM, sparse MoE (4 experts of hidden 8, k=2), LSTM: lstm-moe-ptb's shape
    "moe": ("StackLanguageModel",
            {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 8},
                                            {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8},
                                            {"type": "lstm", "units": 8}]}),
}
TINY_VOCABULARY_SIZE = 50

# A few lines of text with repeated words, so a word tokenizer built from them is small and every
# split shares its words.
TINY_LINES = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "the end"]
TINY_SPLITS = {"train": TINY_LINES * 3, "valid": TINY_LINES[:2], "test": TINY_LINES[2:]}


def set_tokenizer(model, tokenizer):
    """The one place the tests attach a tokenizer to a model."""
    model.tokenizer = tokenizer
    return model


def build_tiny_model(family="gcnn", *, seed=0, tokenizer=None, **overrides):
    """A tiny model of `family` (a key of TINY_FAMILIES), seeded with `seed`. `overrides` replace
    the family's config; a `tokenizer` sets the vocabulary size (unless given) and is attached."""
    import keras

    from zoo import models

    if family not in TINY_FAMILIES:
        raise ValueError(f"Unknown tiny model family {family!r}; expected one of {sorted(TINY_FAMILIES)}.")
    class_name, config = TINY_FAMILIES[family]
    config = {"vocabulary_size": len(tokenizer) if tokenizer is not None else TINY_VOCABULARY_SIZE,
              **config, **overrides}
    keras.utils.set_random_seed(seed)
    model = getattr(models, class_name)(**config)
    if tokenizer is not None:
        set_tokenizer(model, tokenizer)
    return model


@pytest.fixture(scope="session")
def tiny_model():
    """A factory: `tiny_model("lstm", cutoffs=[10, 30])` builds a fresh seeded tiny model (a module
    fixture may use it too: each call builds anew)."""
    return build_tiny_model


@pytest.fixture
def tiny_lines():
    """A few lines of text (a fresh list each time)."""
    return list(TINY_LINES)


@pytest.fixture
def tiny_corpus(tmp_path):
    """A directory holding train.txt, valid.txt and test.txt, one sentence a line; its path as a str."""
    root = tmp_path / "tiny_corpus"
    root.mkdir()
    for split, lines in TINY_SPLITS.items():
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(root)


@pytest.fixture
def word_tokenizer():
    """A word tokenizer built from the tiny lines: 4 special tokens and their 9 words."""
    from zoo.data import WordTokenizer

    return WordTokenizer.build(TINY_LINES)
