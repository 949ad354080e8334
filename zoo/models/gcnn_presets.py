"""Presets of `GCNNLanguageModel`: Table 1 of Dauphin et al. (2016) and CPU-sized treebank models.

Table 1 writes each stage as `[kernel_size, width] × n`, or a bracketed stack of such layers
`× n`. We read every `× n` as n residual blocks (one block per repetition, the bracketed layers
inside one block), the first block of a model projecting the embedding to its width on the skip
path. Under that reading the block counts give the names of GCNN-8, GCNN-8B, GCNN-14 and
GCNN-14B exactly; GCNN-9 has 9 conv layers (1 + 4×2) in 5 blocks and GCNN-13 has 13 blocks
(1 + 12) of 25 conv layers: the table is ambiguous there and we keep its stage rows as written.
"""

from zoo.layers.residual import bottleneck_spec
from zoo.models.gcnn import GCNNLanguageModel
from zoo.registry import register_presets

GBW_VOCABULARY = 793_471  # Google Billion Word, words seen 3 times or more (§4.1)
WT103_VOCABULARY = 267_735  # WikiText-103
PTB_VOCABULARY = 10_002  # the treebank's 9,999 word types (<unk> included) + <pad>, <s>, </s>
# The optimiser of the presets sized for the treebank on a CPU (GCNN and recurrent alike).
PTB_OPTIMIZER = {"name": "adam", "learning_rate": 2e-3, "global_clipnorm": 1.0}


def blocks(layers, n):
    """`n` residual blocks, each the conv layers `layers` (`[kernel_size, width]` pairs)."""
    return [[list(layer) for layer in layers] for _ in range(n)]


def bottlenecks(kernel_size, narrow, wide, n):
    """`n` bottleneck blocks of Table 1 (k=1 down, k>1, k=1 up)."""
    return blocks(bottleneck_spec(kernel_size, narrow, wide), n)


def table_1(paper, vocabulary_size, embedding_dim, stages, cutoffs, note):
    """A Table 1 row as a preset: its blocks end in the adaptive softmax with the row's cutoffs."""
    return {
        "description": f"{paper}: {len(stages)} residual blocks, embedding {embedding_dim}, adaptive "
        f"softmax with cutoffs {'/'.join(f'{c // 1000}k' for c in cutoffs)}. {note}",
        "paper": paper,
        "config": {"vocabulary_size": vocabulary_size, "embedding_dim": embedding_dim, "blocks": stages,
                   "cutoffs": cutoffs},
    }


GCNN_PTB = {
    "vocabulary_size": PTB_VOCABULARY,
    "embedding_dim": 128,
    "blocks": blocks([[4, 128]], 4),
    "dropout": 0.2,
    "optimizer": dict(PTB_OPTIMIZER),
}
# Twice gcnn-ptb's depth (receptive field 25 tokens instead of 13), more dropout and the output
# layer tied to the input embedding, trained in batches half as large (its train defaults): what
# the ptb-recipe ablations chose (docs/reproducing.md).
GCNN_PTB_DEEP = {**GCNN_PTB, "blocks": blocks([[4, 128]], 8), "dropout": 0.3, "tie_embeddings": True}

# gcnn-en: an open-vocabulary English GCNN sized for what 2 CPU cores train in about an hour
# (docs/models/gcnn-en.md): 16,000 subword ids, an adaptive softmax, a cosine schedule.
EN_VOCABULARY = 16_000
GCNN_EN = {
    "vocabulary_size": EN_VOCABULARY,
    "embedding_dim": 256,
    "blocks": blocks([[4, 256]], 6),
    "dropout": 0.1,
    "cutoffs": [2_000, 10_000],
    "optimizer": {**PTB_OPTIMIZER, "decay_steps": 10_000, "final_fraction": 0.05},
}

PRESETS = {
    "gcnn-13": table_1(
        "Table 1, GCNN-13 (Google Billion Word)", GBW_VOCABULARY, 128,
        blocks([[4, 1268]], 1) + blocks([[4, 1268], [4, 1268]], 12),
        [10_000, 40_000, 200_000],
        "Conv2.x [4,1268;4,1268]×12 read as 12 two-layer blocks (13 blocks, 25 conv layers).",
    ),
    "gcnn-14b": table_1(
        "Table 1, GCNN-14B (Google Billion Word)", GBW_VOCABULARY, 128,
        blocks([[5, 512]], 1) + bottlenecks(5, 128, 512, 3) + bottlenecks(5, 512, 1024, 3)
        + bottlenecks(5, 1024, 2048, 6) + bottlenecks(5, 1024, 4096, 1),
        [10_000, 40_000, 200_000],
        "14 blocks: one plain, then 3+3+6+1 bottleneck blocks.",
    ),
    "gcnn-9": table_1(
        "Table 1, GCNN-9 (Google Billion Word)", GBW_VOCABULARY, 128,
        blocks([[4, 807]], 1) + blocks([[4, 807], [4, 807]], 4),
        [4_000, 40_000, 200_000],
        "9 conv layers: Conv1 and 4 two-layer blocks (5 blocks).",
    ),
    "gcnn-8b": table_1(
        "Table 1, GCNN-8B (Google Billion Word)", GBW_VOCABULARY, 128,
        blocks([[1, 512]], 1) + bottlenecks(5, 128, 512, 3) + bottlenecks(5, 256, 512, 3)
        + blocks([[1, 1024], [1, 1024], [1, 2048]], 1),
        [4_000, 40_000, 200_000],
        "8 blocks; Conv4.x is all width-1 layers, as the table gives it.",
    ),
    "gcnn-8": table_1(
        "Table 1, GCNN-8 (WikiText-103)", WT103_VOCABULARY, 280,
        blocks([[4, 900]], 1) + blocks([[4, 900]], 7),
        [2_000, 10_000, 50_000],
        "8 single-layer blocks of width 900 (Table 1 lists 900; §5.1 says 800).",
    ),
    "gcnn-14": table_1(
        "Table 1, GCNN-14 (WikiText-103)", WT103_VOCABULARY, 280,
        blocks([[6, 850]], 3) + blocks([[1, 850]], 1) + blocks([[5, 850]], 4) + blocks([[1, 850]], 1)
        + blocks([[4, 850]], 3) + blocks([[4, 1024]], 1) + blocks([[4, 2048]], 1),
        [10_000, 20_000, 200_000],
        "14 single-layer blocks.",
    ),
    "gcnn-ptb": {
        "description": "GCNN sized and regularised for the Penn Treebank on a CPU: embedding 128, "
        "4 GLU blocks of width 128 (kernel 4, receptive field 13), dropout 0.2, full softmax "
        "(cutoffs=[...] for an adaptive one).",
        "paper": "§5.1 (Penn Treebank), sized for 2 CPU cores",
        "tokenizer": "ptb",
        "config": GCNN_PTB,
        "train": {"batch_size": 32, "seq_len": 64},
    },
    "gcnn-ptb-deep": {
        "description": "gcnn-ptb twice as deep: embedding 128, 8 GLU blocks of width 128 (kernel 4, "
        "receptive field 25), dropout 0.3, a full softmax tied to the input embedding, trained in "
        "batches of 16 × 64 tokens; the best treebank GCNN of `zoo reproduce ptb-recipe` "
        "(weights=\"trained\").",
        "paper": "§5.1 (Penn Treebank), sized for 2 CPU cores",
        "tokenizer": "ptb",
        "config": GCNN_PTB_DEEP,
        "train": {"batch_size": 16, "seq_len": 64},
    },
    "gcnn-moe-ptb": {
        "description": "gcnn-ptb with a sparse MoE (32 experts of hidden 128, k=4) after its "
        "second block: the GCNN paper's §5.1 next step.",
        "paper": "Dauphin et al. §5.1 + Shazeer et al. 2017, sized for 2 CPU cores",
        "tokenizer": "ptb",
        "config": {**GCNN_PTB, "moe": {"after_blocks": [1], "num_experts": 32, "k": 4, "hidden_units": 128}},
        "train": {"batch_size": 32, "seq_len": 64},
    },
}

PRESETS["gcnn-en"] = {
    "description": "Open-vocabulary English GCNN: 16,000 subword ids, embedding 256, 6 GLU blocks of "
    "width 256 (kernel 4, receptive field 19), adaptive softmax; ships trained on 4.4M words of "
    "speeches, Wikipedia, the King James Bible, Linux man pages and Perl's documentation "
    "(weights=\"trained\").",
    "paper": "Dauphin et al. 2016's GCNN, sized for 2 CPU cores",
    "tokenizer": "subword",
    "config": GCNN_EN,
    "train": {"batch_size": 32, "seq_len": 64},
    # Fine-tuning the trained weights: the pretraining recipe at half its learning rate, chosen on
    # the Penn Treebank (no held-out source) by `zoo reproduce finetune-rate` (docs/fine-tuning.md).
    "fine_tune_optimizer": {**GCNN_EN["optimizer"], "learning_rate": GCNN_EN["optimizer"]["learning_rate"] / 2},
}

register_presets(PRESETS, GCNNLanguageModel)

# gcnn-moe-en: gcnn-en with a sparse mixture of 64 experts (ReLU hidden 512, k=2, Shazeer et al.'s
# noisy top-k gate and balance losses) after its fourth block; gcnn-wide-en, its dense twin: the
# same network with one always-used feed-forward layer of hidden 2 × 512 in the mixture's place
# (Table 7's MoE-1-Wide), the same inference multiply-adds per token within 0.4%
# (`zoo.models.compute`; docs/models/gcnn-moe-en.md). Both train gcnn-en's 10,000 steps on its cosine schedule.
MOE_EN_STEPS = 10_000
MOE_EN = {"after_blocks": [3], "num_experts": 64, "k": 2, "hidden_units": 512}
MOE_EN_OPTIMIZER = {**PTB_OPTIMIZER, "decay_steps": MOE_EN_STEPS, "final_fraction": 0.05}
PRESETS_MOE_EN = {
    "gcnn-moe-en": {
        "description": "gcnn-en with a sparse mixture of 64 experts (hidden 512, k=2) after its fourth block: "
        "25.3M parameters, 4.8M multiply-adds per token like its dense twin gcnn-wide-en; trained on gcnn-en's "
        "corpus and tokenizer (weights=\"trained\").",
        "paper": "Dauphin et al. 2016's GCNN + Shazeer et al. 2017's sparse MoE, sized for 2 CPU cores",
        "tokenizer": "subword",
        "config": {**GCNN_EN, "moe": dict(MOE_EN), "optimizer": dict(MOE_EN_OPTIMIZER)},
        "train": {"batch_size": 32, "seq_len": 64},
        # fine-tuning: half the rate, and the factorised Adam of Appendix D for the experts (their
        # second moments as row and column averages, no first moment), plain Adam elsewhere
        "fine_tune_optimizer": {**MOE_EN_OPTIMIZER, "name": "factorized_adam",
                                "learning_rate": MOE_EN_OPTIMIZER["learning_rate"] / 2},
    },
    "gcnn-wide-en": {
        "description": "gcnn-moe-en's dense twin: gcnn-en with one feed-forward layer (hidden 1,024) after its "
        "fourth block, the mixture's computation per token (Table 7's MoE-1-Wide); 8.9M parameters.",
        "paper": "Shazeer et al. 2017's MoE-1-Wide baseline on Dauphin et al. 2016's GCNN",
        "tokenizer": "subword",
        "config": {**GCNN_EN, "feed_forward": {"after_blocks": MOE_EN["after_blocks"],
                                               "hidden_units": MOE_EN["k"] * MOE_EN["hidden_units"]},
                   "optimizer": dict(MOE_EN_OPTIMIZER)},
        "train": {"batch_size": 32, "seq_len": 64},
    },
}
register_presets(PRESETS_MOE_EN, GCNNLanguageModel)
