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


# ---- Shazeer et al. (2017), Appendix C, Table 7: embedding, LSTM, MoE, LSTM, softmax ----------
def _lstm_moe(dim, middle, lstm=None, dropout=0.1, moe_optimizer=True):
    lstm = lstm or {"type": "lstm", "units": dim}
    return {
        "vocabulary_size": GBW_VOCABULARY,
        "embedding_dim": dim,
        "layers": [dict(lstm)] + [dict(m) for m in middle] + [dict(lstm)],
        "dropout": dropout,
        # The paper trained a sampled softmax (importance sampling, Jozefowicz et al. 2016);
        # the zoo's exact, fast equivalent is the adaptive softmax with Table 1's GBW cutoffs.
        "cutoffs": [10_000, 40_000, 200_000],
        # Adam with 1000 warm-up steps then 1/sqrt(step) decay (C.1); the factorised Adam of
        # Appendix D for the expert matrices.
        "optimizer": {"name": "factorized_adam" if moe_optimizer else "adam", "learning_rate": 1e-3,
                      "warmup_steps": 1000},
    }


def _moe(n, k, hidden=1024, groups=None, **extra):
    spec = {"type": "moe", "num_experts": n, "k": k, "hidden_units": hidden}
    if groups:
        spec["groups"] = groups
    spec.update(extra)
    return spec


TABLE_7 = {
    "moe-4": ("MoE-4: 4 experts, k=4 (no sparsity)", _lstm_moe(512, [_moe(4, 4)])),
    "moe-32": ("MoE-32: 32 experts, k=4", _lstm_moe(512, [_moe(32, 4)])),
    "moe-256": ("MoE-256: 256 experts, k=4", _lstm_moe(512, [_moe(256, 4)])),
    "moe-256-h": ("MoE-256-h: hierarchical, 16 groups of 16 experts, k=2 at each level",
                  _lstm_moe(512, [_moe(256, 2, groups=16)])),
    "moe-1024-h": ("MoE-1024-h: hierarchical, 16 groups of 64 experts, k=2 at each level",
                   _lstm_moe(512, [_moe(1024, 2, groups=16)], dropout=0.2)),
    "moe-4096-h": ("MoE-4096-h: hierarchical, 16 groups of 256 experts, k=2 at each level",
                   _lstm_moe(512, [_moe(4096, 2, groups=16)], dropout=0.2)),
    "moe-34m": ("MoE-34M (C.2): width 1024, LSTMs of 1024, hierarchical 1024 experts of hidden 2048",
                _lstm_moe(1024, [_moe(1024, 2, hidden=2048, groups=16)], dropout=0.3)),
    "moe-143m": ("MoE-143M (C.2): width 1024, LSTMs of 4096 projected to 1024, hierarchical 256 "
                 "experts of hidden 8192",
                 _lstm_moe(1024, [_moe(256, 2, hidden=8192, groups=16)],
                           lstm={"type": "lstm", "units": 4096, "projection": 1024}, dropout=0.4)),
    "moe-1-wide": ("MoE-1-Wide baseline: one always-used expert with a ReLU layer of 4096",
                   _lstm_moe(512, [{"type": "ffn", "hidden_units": [4096]}], moe_optimizer=False)),
    "moe-1-deep": ("MoE-1-Deep baseline: one always-used expert with four ReLU layers of 1024",
                   _lstm_moe(512, [{"type": "ffn", "hidden_units": [1024] * 4}], moe_optimizer=False)),
    "4xlstm-512": ("4xLSTM-512 baseline: the MoE replaced by two more LSTM layers of 512",
                   _lstm_moe(512, [{"type": "lstm", "units": 512}] * 2, moe_optimizer=False)),
    "lstm-2048-512": ("LSTM-2048-512 baseline: one LSTM of 2048 units projected to 512, no MoE",
                      {**_lstm_moe(512, [], moe_optimizer=False),
                       "layers": [{"type": "lstm", "units": 2048, "projection": 512}]}),
}
for _name, (_what, _config) in TABLE_7.items():
    PRESETS[_name] = {
        "class_name": "StackLanguageModel",
        "description": f"Table 7, {_what}; vocabulary 793,471 (One Billion Word) with an adaptive "
        "softmax (10k/40k/200k) where the paper used importance sampling.",
        "paper": "Shazeer et al. 2017, Appendix C, Table 7",
        "config": _config,
    }

def _ptb_stack(middle):
    """LSTM 256, `middle`, LSTM 256 on the treebank: the MoE preset and its dense baseline differ
    only in the middle layer."""
    return {
        "vocabulary_size": PTB_VOCABULARY,
        "embedding_dim": 256,
        "layers": [{"type": "lstm", "units": 256}, dict(middle), {"type": "lstm", "units": 256}],
        "dropout": 0.2,
        "optimizer": {"name": "adam", "learning_rate": 2e-3, "clipnorm": 1.0},
    }


PRESETS.update(
    {
        "lstm-moe-ptb": {
            "class_name": "StackLanguageModel",
            "description": "LSTM–MoE–LSTM for the Penn Treebank on a CPU: width 256, 32 experts "
            "(ReLU hidden 256), k=4, losses 0.1/0.1, dropout 0.2, full softmax.",
            "paper": "Shazeer et al. 2017, Appendix C.1, sized for 2 CPU cores",
            "config": _ptb_stack(_moe(32, 4, hidden=256)),
            "train": {"batch_size": 32, "seq_len": 64},
        },
        "lstm-wide-ptb": {
            "class_name": "StackLanguageModel",
            "description": "The compute-matched dense baseline of lstm-moe-ptb (its MoE-1-Wide): one "
            "always-used feed-forward layer of 1024 (= 4 experts of 256) between the LSTMs.",
            "paper": "Shazeer et al. 2017, Appendix C.1 baselines, sized for 2 CPU cores",
            "config": _ptb_stack({"type": "ffn", "hidden_units": [1024]}),
            "train": {"batch_size": 32, "seq_len": 64},
        },
        "gcnn-moe-ptb": {
            "class_name": "GCNNLanguageModel",
            "description": "gcnn-ptb with a sparse MoE (32 experts of hidden 128, k=4) after its "
            "second block: the GCNN paper's §5.1 next step.",
            "paper": "Dauphin et al. §5.1 + Shazeer et al. 2017, sized for 2 CPU cores",
            "config": {
                **PRESETS["gcnn-ptb"]["config"],
                "moe": {"after_blocks": [1], "num_experts": 32, "k": 4, "hidden_units": 128},
            },
            "train": {"batch_size": 32, "seq_len": 64},
        },
    }
)
