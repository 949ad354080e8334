"""Checks and preset groups shared by the models' tests (zoo/models/*_test.py import it as
`tests.model_checks`, as the layers' tests import `tests.layer_checks`). Not part of the installed
package."""

import numpy as np

# The presets each test file covers: gcnn_test.py Table 1's, base_test.py the treebank-sized GCNN
# and recurrent ones, stack_test.py Table 7 and the treebank's stack presets, compute_test.py the
# English mixture and its twin.
TABLE_1 = ("gcnn-13", "gcnn-14b", "gcnn-9", "gcnn-8b", "gcnn-8")
CPU_PRESETS = ("gcnn-14", "gcnn-ptb", "gcnn-ptb-deep", "lstm-ptb", "rnn-char", "gcnn-en")
TABLE_7 = ("moe-4", "moe-32", "moe-256", "moe-256-h", "moe-1024-h", "moe-4096-h", "moe-34m",
           "moe-143m", "moe-1-wide", "moe-1-deep", "4xlstm-512", "lstm-2048-512")
MOE_PTB = ("lstm-moe-ptb", "lstm-wide-ptb", "gcnn-moe-ptb", "lstmp-ptb")
MOE_EN = ("gcnn-moe-en", "gcnn-wide-en")  # compute_test.py: the mixture of gcnn-en and its dense twin

PERTURBATIONS = [(0, 1), (4, 2), (11, 1), (17, 5), (25, 1), (28, 1)]  # (t, j): change token t + j


def assert_causal(model, length=30, seed=0):
    """Changing token t + j (j >= 1) leaves log_probs at positions <= t unchanged."""
    vocab = model.vocabulary_size
    rng = np.random.default_rng(seed)
    base = rng.integers(4, vocab, size=length)
    rows = [base]
    for t, j in PERTURBATIONS:
        row = base.copy()
        row[t + j] = 4 + (row[t + j] - 4 + 1 + rng.integers(0, vocab - 5)) % (vocab - 4)
        assert row[t + j] != base[t + j]
        rows.append(row)
    log_probs = model.log_probs(np.stack(rows))  # one batched call
    assert log_probs.shape == (len(rows), length, vocab)
    assert log_probs.dtype == np.float32
    for row, (t, j) in enumerate(PERTURBATIONS, start=1):
        np.testing.assert_allclose(log_probs[row, : t + 1], log_probs[0, : t + 1], rtol=1e-6, atol=1e-6,
                                   err_msg=f"position <= {t} sees token {t + j}")
        assert np.abs(log_probs[row, t + j] - log_probs[0, t + j]).max() > 1e-6, (t, j)


def pattern_corpus(n=30):
    """Line i is five consecutive letters of a cycle starting at letter i: the next letter
    is always determined by the current one."""
    letters = "a b c d e f g h".split()
    return [" ".join(letters[(i + k) % 8] for k in range(5)) for i in range(n)]


def vocab_model(tiny_model, lines, kind="gcnn"):
    """`(model, lines)`: a tiny model of `kind` ("gcnn": receptive field 4, a full softmax;
    "gcnn-adaptive": an adaptive softmax; else a conftest family) with a word tokenizer of
    12 pattern lines plus `lines` (conftest's `tiny_lines`), and those lines."""
    from zoo.data import WordTokenizer
    from zoo.layers import AdaptiveSoftmax, FullSoftmax

    lines = pattern_corpus(12) + list(lines)
    vocab = WordTokenizer.build(lines)
    if kind == "gcnn":
        model = tiny_model("gcnn", tokenizer=vocab, blocks=[[[3, 8]], [[2, 8]]])  # receptive field 4
        assert isinstance(model.head, FullSoftmax)
    elif kind == "gcnn-adaptive":
        model = tiny_model("gcnn", tokenizer=vocab, blocks=[[[3, 16]], [[2, 16]]], cutoffs=[6, 12])
        assert isinstance(model.head, AdaptiveSoftmax)
    else:
        model = tiny_model(kind, tokenizer=vocab)
    return model, lines
