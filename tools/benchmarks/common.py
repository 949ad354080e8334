"""The benchmarks' shared inputs: Zipf-distributed ids, a stand-in vocabulary, `--presets` and the
presets' tiny `--small` configs. Numpy only at module level, like harness.py.
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

        words = [f"w{i}" for i in range(model.vocabulary_size - len(SPECIALS))]
        model.tokenizer = WordTokenizer(list(SPECIALS) + words)
    return model


# --small: a tiny random config of each preset the serving and generate benchmarks time (smoke tests)
SMALL_CONFIGS = {
    "gcnn-ptb": {"embedding_dim": 8, "blocks": [[[3, 16]], [[3, 16]]]},
    "lstm-ptb": {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 8}] * 2},
    "lstmp-ptb": {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 16, "projection": 8}]},
    "lstm-moe-ptb": {"embedding_dim": 16, "layers": [{"type": "lstm", "units": 16},
                                                      {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8},
                                                      {"type": "lstm", "units": 16}]},
    "gcnn-moe-ptb": {"embedding_dim": 8, "blocks": [[[3, 16]], [[3, 16]]],
                     "moe": {"after_blocks": [1], "num_experts": 4, "k": 2, "hidden_units": 8}},
}


def build_model(preset, small, weights=None, seed=0):
    """The preset with its treebank vocabulary (`weights`: as `zoo.load` takes them, None for
    random), or with `small` its tiny config of `SMALL_CONFIGS` (random weights from `seed`, a
    50-word stand-in vocabulary)."""
    import zoo

    if not small:
        model = zoo.load(preset, weights=weights) if weights else zoo.load(preset)
        if model.tokenizer is None:
            raise ValueError(f"The preset {preset!r} has no default vocabulary to serve text with.")
        return model
    if preset not in SMALL_CONFIGS:
        raise ValueError(f"--small knows the presets {', '.join(SMALL_CONFIGS)}, not {preset!r}.")
    import keras

    keras.utils.set_random_seed(seed)
    return with_stand_in_vocabulary(zoo.load(preset, vocabulary_size=50, **SMALL_CONFIGS[preset]))


def preset_list(value):
    """The names of a comma-separated `--presets` value; one that names none is refused in one
    sentence."""
    presets = [name for name in value.split(",") if name]
    if not presets:
        raise ValueError("--presets names no preset; give at least one, e.g. --presets gcnn-ptb.")
    return presets
