"""Presets of `RecurrentLanguageModel`: the recurrent baselines of the introduction (004)."""

from zoo.models.gcnn_presets import PTB_VOCABULARY
from zoo.models.recurrent import RecurrentLanguageModel
from zoo.registry import register_presets

PRESETS = {
    "lstm-ptb": {
        "description": "The recurrent baseline on the Penn Treebank: a 2-layer LSTM of 256 units, "
        "embedding 256, dropout 0.2.",
        "paper": "004 (recurrent language models); §5.1's LSTM comparison",
        "vocabulary": "ptb",
        "config": {
            "vocabulary_size": PTB_VOCABULARY,
            "embedding_dim": 256,
            "units": [256, 256],
            "cell": "lstm",
            "dropout": 0.2,
            "optimizer": {"name": "adam", "learning_rate": 2e-3, "clipnorm": 1.0},
        },
        "train": {"batch_size": 32, "seq_len": 64},
    },
    "rnn-char": {
        "description": "A character-level Elman RNN (512 units), the example of the recurrent "
        "language model introduction (004).",
        "paper": "004 (character-level RNN language model)",
        "vocabulary": "char",
        "config": {
            "vocabulary_size": 64,
            "embedding_dim": 32,
            "units": [512],
            "cell": "rnn",
            "stream_context": 128,
            "optimizer": {"name": "adam", "learning_rate": 2e-3, "clipnorm": 1.0},
        },
        "train": {"batch_size": 32, "seq_len": 128},
    },
}

register_presets(PRESETS, RecurrentLanguageModel)
