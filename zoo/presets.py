"""The preset registry: the paper's architectures and CPU-sized Penn Treebank models.

Table 1 of Dauphin et al. writes each stage as `[kernel_size, width] × n`, or a bracketed stack
of such layers `× n`. We read every `× n` as n residual blocks (one block per repetition, the
bracketed layers inside one block), the first block of a model projecting the embedding to its
width on the skip path. Under that reading the block counts give the names of GCNN-8, GCNN-8B,
GCNN-14 and GCNN-14B exactly; GCNN-9 has 9 conv layers (1 + 4×2) in 5 blocks and GCNN-13 has
13 blocks (1 + 12) of 25 conv layers: the table is ambiguous there and we keep its stage rows
as written.
"""

GBW_VOCABULARY = 793_471  # Google Billion Word, words seen 3 times or more (§4.1)
WT103_VOCABULARY = 267_735  # WikiText-103
PTB_VOCABULARY = 10_002  # the treebank's 9,999 word types (<unk> included) + <pad>, <s>, </s>


def _repeat(layers, n):
    return [[list(l) for l in layers] for _ in range(n)]


def _bottleneck(k, narrow, wide, n):
    return _repeat([[1, narrow], [k, narrow], [1, wide]], n)


TABLE_1 = {
    "gcnn-13": dict(
        paper="Table 1, GCNN-13 (Google Billion Word)",
        vocabulary_size=GBW_VOCABULARY, embedding_dim=128,
        blocks=_repeat([[4, 1268]], 1) + _repeat([[4, 1268], [4, 1268]], 12),
        cutoffs=[10_000, 40_000, 200_000],
        note="Conv2.x [4,1268;4,1268]×12 read as 12 two-layer blocks (13 blocks, 25 conv layers).",
    ),
    "gcnn-14b": dict(
        paper="Table 1, GCNN-14B (Google Billion Word)",
        vocabulary_size=GBW_VOCABULARY, embedding_dim=128,
        blocks=_repeat([[5, 512]], 1) + _bottleneck(5, 128, 512, 3) + _bottleneck(5, 512, 1024, 3)
        + _bottleneck(5, 1024, 2048, 6) + _bottleneck(5, 1024, 4096, 1),
        cutoffs=[10_000, 40_000, 200_000],
        note="14 blocks: one plain, then 3+3+6+1 bottleneck blocks.",
    ),
    "gcnn-9": dict(
        paper="Table 1, GCNN-9 (Google Billion Word)",
        vocabulary_size=GBW_VOCABULARY, embedding_dim=128,
        blocks=_repeat([[4, 807]], 1) + _repeat([[4, 807], [4, 807]], 4),
        cutoffs=[4_000, 40_000, 200_000],
        note="9 conv layers: Conv1 and 4 two-layer blocks (5 blocks).",
    ),
    "gcnn-8b": dict(
        paper="Table 1, GCNN-8B (Google Billion Word)",
        vocabulary_size=GBW_VOCABULARY, embedding_dim=128,
        blocks=_repeat([[1, 512]], 1) + _bottleneck(5, 128, 512, 3) + _bottleneck(5, 256, 512, 3)
        + _repeat([[1, 1024], [1, 1024], [1, 2048]], 1),
        cutoffs=[4_000, 40_000, 200_000],
        note="8 blocks; Conv4.x is all width-1 layers, as the table gives it.",
    ),
    "gcnn-8": dict(
        paper="Table 1, GCNN-8 (WikiText-103)",
        vocabulary_size=WT103_VOCABULARY, embedding_dim=280,
        blocks=_repeat([[4, 900]], 1) + _repeat([[4, 900]], 7),
        cutoffs=[2_000, 10_000, 50_000],
        note="8 single-layer blocks of width 900 (Table 1 lists 900; §5.1 says 800).",
    ),
    "gcnn-14": dict(
        paper="Table 1, GCNN-14 (WikiText-103)",
        vocabulary_size=WT103_VOCABULARY, embedding_dim=280,
        blocks=_repeat([[6, 850]], 3) + _repeat([[1, 850]], 1) + _repeat([[5, 850]], 4)
        + _repeat([[1, 850]], 1) + _repeat([[4, 850]], 3) + _repeat([[4, 1024]], 1)
        + _repeat([[4, 2048]], 1),
        cutoffs=[10_000, 20_000, 200_000],
        note="14 single-layer blocks.",
    ),
}

PRESETS = {}
for _name, _spec in TABLE_1.items():
    PRESETS[_name] = {
        "class_name": "GCNNLanguageModel",
        "description": f"{_spec['paper']}: {len(_spec['blocks'])} residual blocks, "
        f"embedding {_spec['embedding_dim']}, adaptive softmax with cutoffs "
        f"{'/'.join(f'{c // 1000}k' for c in _spec['cutoffs'])}. {_spec['note']}",
        "paper": _spec["paper"],
        "config": {
            "vocabulary_size": _spec["vocabulary_size"],
            "embedding_dim": _spec["embedding_dim"],
            "blocks": _spec["blocks"],
            "cutoffs": _spec["cutoffs"],
        },
    }

PRESETS.update(
    {
        "gcnn-ptb": {
            "class_name": "GCNNLanguageModel",
            "description": "GCNN sized and regularised for the Penn Treebank on a CPU: embedding 128, "
            "4 GLU blocks of width 128 (kernel 4, receptive field 13), dropout 0.2, full softmax "
            "(cutoffs=[...] for an adaptive one).",
            "paper": "§5.1 (Penn Treebank), sized for 2 CPU cores",
            "config": {
                "vocabulary_size": PTB_VOCABULARY,
                "embedding_dim": 128,
                "blocks": [[[4, 128]], [[4, 128]], [[4, 128]], [[4, 128]]],
                "dropout": 0.2,
                "optimizer": {"name": "adam", "learning_rate": 2e-3, "clipnorm": 1.0},
            },
            "train": {"batch_size": 32, "seq_len": 64},
        },
        "lstm-ptb": {
            "class_name": "RecurrentLanguageModel",
            "description": "The recurrent baseline on the Penn Treebank: a 2-layer LSTM of 256 units, "
            "embedding 256, dropout 0.2.",
            "paper": "004 (recurrent language models); §5.1's LSTM comparison",
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
            "class_name": "RecurrentLanguageModel",
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
)
