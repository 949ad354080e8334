"""The benchmarks' shared inputs: Zipf-distributed ids, a stand-in vocabulary, a `--presets` list.
How they measure and report is harness.py's.

Numpy only at module level, like harness.py: the PyTorch peer of `adaptive-softmax`
(adaptive_softmax_torch.py) imports this file as its sibling, under a Python without the zoo.
"""

import numpy as np


def zipf_targets(vocabulary_size, count, seed=0):
    """`count` ids in [0, vocabulary_size) with P(id = r) proportional to 1 / (r + 1): the
    rank-frequency law of words, truncated to the vocabulary (id 0 the most frequent)."""
    if vocabulary_size < 1:
        raise ValueError(f"vocabulary_size must be >= 1, got {vocabulary_size}.")
    cdf = np.cumsum(1.0 / np.arange(1, vocabulary_size + 1, dtype=np.float64))
    cdf /= cdf[-1]
    ids = np.searchsorted(cdf, np.random.default_rng(seed).random(count), side="right")
    return np.minimum(ids, vocabulary_size - 1).astype(np.int32)


def with_stand_in_vocabulary(model):
    """`model`, given a word vocabulary of its size (`w0`, `w1`, …) where it has no tokenizer: a
    preset of the paper's size, whose vocabulary comes with weights that do not ship here, can
    then be exported and served for its speed and size."""
    if getattr(model, "tokenizer", None) is None:
        from zoo.data.vocab import SPECIALS, WordTokenizer

        model.tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(model.vocabulary_size - len(SPECIALS))])
    return model


def preset_list(value):
    """The names of a comma-separated `--presets` value; one that names none is refused in one
    sentence."""
    presets = [name for name in value.split(",") if name]
    if not presets:
        raise ValueError("--presets names no preset; give at least one, e.g. --presets gcnn-ptb.")
    return presets
