"""Presets of `StackLanguageModel`: the recurrent baselines of the introduction (004), Shazeer et al.
(2017), Appendix C, Table 7 (embedding, LSTM, MoE, LSTM, softmax) and their CPU-sized Penn Treebank
counterparts."""

from zoo.models.gcnn_presets import GBW_VOCABULARY, PTB_OPTIMIZER, PTB_VOCABULARY
from zoo.models.stack import StackLanguageModel
from zoo.registry import register_presets


def lstm_moe(dim, middle, lstm=None, dropout=0.1, moe_optimizer=True):
    """Embedding `dim`, an LSTM, the `middle` layers, an LSTM (C.1), at One Billion Word's vocabulary."""
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


def moe(n, k, hidden=1024, groups=None):
    """A sparse MoE layer of the stack: `n` experts of ReLU width `hidden`, `k` per token."""
    spec = {"type": "moe", "num_experts": n, "k": k, "hidden_units": hidden}
    if groups:
        spec["groups"] = groups
    return spec


def table_7(what, config):
    return {
        "description": f"Table 7, {what}; vocabulary 793,471 (One Billion Word) with an adaptive "
        "softmax (10k/40k/200k) where the paper used importance sampling.",
        "paper": "Shazeer et al. 2017, Appendix C, Table 7",
        "config": config,
    }


def ptb_stack(middle):
    """LSTM 256, `middle`, LSTM 256 on the treebank: the MoE preset and its dense baseline differ
    only in the middle layer."""
    return {
        "vocabulary_size": PTB_VOCABULARY,
        "embedding_dim": 256,
        "layers": [{"type": "lstm", "units": 256}, dict(middle), {"type": "lstm", "units": 256}],
        "dropout": 0.2,
        "optimizer": dict(PTB_OPTIMIZER),
    }


def treebank(description, paper, config):
    """A preset sized for the Penn Treebank on a CPU: the treebank's own word vocabulary, windows of
    64 tokens in batches of 32."""
    return {"description": description, "paper": paper, "tokenizer": "ptb", "config": config,
            "train": {"batch_size": 32, "seq_len": 64}}


PRESETS = {
    # The introduction's models have no residual connection (`residual=False`).
    "lstm-ptb": treebank(
        "The recurrent baseline on the Penn Treebank: a 2-layer LSTM of 256 units, embedding 256, dropout 0.2.",
        "004 (recurrent language models); §5.1's LSTM comparison",
        {"vocabulary_size": PTB_VOCABULARY, "embedding_dim": 256,
         "layers": [{"type": "lstm", "units": 256}, {"type": "lstm", "units": 256}], "dropout": 0.2,
         "residual": False, "optimizer": dict(PTB_OPTIMIZER)},
    ),
    "rnn-char": {
        "description": "A character-level Elman RNN (512 units), the example of the recurrent "
        "language model introduction (004).",
        "paper": "004 (character-level RNN language model)",
        "tokenizer": "char",
        "config": {
            "vocabulary_size": 64,
            "embedding_dim": 32,
            "layers": [{"type": "rnn", "units": 512}],
            "residual": False,
            "stream_context": 128,
            "optimizer": dict(PTB_OPTIMIZER),
        },
        "train": {"batch_size": 32, "seq_len": 128},
    },
    "moe-4": table_7("MoE-4: 4 experts, k=4 (no sparsity)", lstm_moe(512, [moe(4, 4)])),
    "moe-32": table_7("MoE-32: 32 experts, k=4", lstm_moe(512, [moe(32, 4)])),
    "moe-256": table_7("MoE-256: 256 experts, k=4", lstm_moe(512, [moe(256, 4)])),
    "moe-256-h": table_7("MoE-256-h: hierarchical, 16 groups of 16 experts, k=2 at each level",
                         lstm_moe(512, [moe(256, 2, groups=16)])),
    "moe-1024-h": table_7("MoE-1024-h: hierarchical, 16 groups of 64 experts, k=2 at each level",
                          lstm_moe(512, [moe(1024, 2, groups=16)], dropout=0.2)),
    "moe-4096-h": table_7("MoE-4096-h: hierarchical, 16 groups of 256 experts, k=2 at each level",
                          lstm_moe(512, [moe(4096, 2, groups=16)], dropout=0.2)),
    "moe-34m": table_7("MoE-34M (C.2): width 1024, LSTMs of 1024, hierarchical 1024 experts of hidden 2048",
                       lstm_moe(1024, [moe(1024, 2, hidden=2048, groups=16)], dropout=0.3)),
    "moe-143m": table_7("MoE-143M (C.2): width 1024, LSTMs of 4096 projected to 1024, hierarchical 256 "
                        "experts of hidden 8192",
                        lstm_moe(1024, [moe(256, 2, hidden=8192, groups=16)],
                                 lstm={"type": "lstm", "units": 4096, "projection": 1024}, dropout=0.4)),
    "moe-1-wide": table_7("MoE-1-Wide baseline: one always-used expert with a ReLU layer of 4096",
                          lstm_moe(512, [{"type": "ffn", "hidden_units": [4096]}], moe_optimizer=False)),
    "moe-1-deep": table_7("MoE-1-Deep baseline: one always-used expert with four ReLU layers of 1024",
                          lstm_moe(512, [{"type": "ffn", "hidden_units": [1024] * 4}], moe_optimizer=False)),
    "4xlstm-512": table_7("4xLSTM-512 baseline: the MoE replaced by two more LSTM layers of 512",
                          lstm_moe(512, [{"type": "lstm", "units": 512}] * 2, moe_optimizer=False)),
    "lstm-2048-512": table_7("LSTM-2048-512 baseline: one LSTM of 2048 units projected to 512, no MoE",
                             {**lstm_moe(512, [], moe_optimizer=False),
                              "layers": [{"type": "lstm", "units": 2048, "projection": 512}]}),
    "lstm-moe-ptb": treebank(
        "LSTM–MoE–LSTM for the Penn Treebank on a CPU: width 256, 32 experts (ReLU hidden 256), k=4, losses "
        "0.1/0.1, dropout 0.2, full softmax.",
        "Shazeer et al. 2017, Appendix C.1, sized for 2 CPU cores",
        ptb_stack(moe(32, 4, hidden=256)),
    ),
    "lstmp-ptb": treebank(
        "An LSTM for the Penn Treebank at gcnn-ptb's size: embedding 128, one LSTM of 512 units projected to 128 "
        "(as LSTM-2048-512), dropout 0.2, full softmax; 3.2M parameters against gcnn-ptb's 3.1M.",
        "Dauphin et al. §5 (the treebank's LSTM comparison), sized for 2 CPU cores",
        {"vocabulary_size": PTB_VOCABULARY, "embedding_dim": 128,
         "layers": [{"type": "lstm", "units": 512, "projection": 128}], "dropout": 0.2,
         "optimizer": dict(PTB_OPTIMIZER)},
    ),
    "lstm-wide-ptb": treebank(
        "The compute-matched dense baseline of lstm-moe-ptb (its MoE-1-Wide): one always-used feed-forward layer "
        "of 1024 (= 4 experts of 256) between the LSTMs.",
        "Shazeer et al. 2017, Appendix C.1 baselines, sized for 2 CPU cores",
        ptb_stack({"type": "ffn", "hidden_units": [1024]}),
    ),
}

register_presets(PRESETS, StackLanguageModel)
