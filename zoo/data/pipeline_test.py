"""The tf.data pipelines (zoo/data/pipeline.py): a stream cut into windows with their context, and
sentences batched by length, every target counted once."""

import numpy as np
import pytest

from zoo.data import WordTokenizer, sentence_dataset, stream_dataset
from zoo.data.pipeline import stream_ids, stream_windows


# ---- stream windows ---------------------------------------------------------------------
def test_stream_windows_exact():
    # "<s> a b c </s>" "<s> d </s>" as ids
    ids = np.array([1, 5, 6, 7, 2, 1, 8, 2], np.int32)
    inputs, targets, weights = stream_windows(ids, seq_len=3, context=2)
    # The first window starts at the stream's start and scores all its targets; the next
    # one re-reads 2 tokens of context (weight 0) before its 3 new targets.
    np.testing.assert_array_equal(inputs, [[1, 5, 6, 7, 2], [7, 2, 1, 8, 2]])
    np.testing.assert_array_equal(targets, [[5, 6, 7, 2, 1], [2, 1, 8, 2, 0]])
    np.testing.assert_array_equal(weights, [[1, 1, 1, 1, 0], [0, 0, 1, 1, 0]])
    # every real target except <s> is scored exactly once
    scored = targets[weights > 0]
    assert sorted(scored.tolist()) == sorted(t for t in ids[1:].tolist() if t != 1)


def test_stream_windows_without_context():
    ids = np.array([1, 5, 6, 2, 1, 7, 2], np.int32)
    inputs, targets, weights = stream_windows(ids, seq_len=3, context=0)
    np.testing.assert_array_equal(inputs, [[1, 5, 6], [2, 1, 7]])
    np.testing.assert_array_equal(targets, [[5, 6, 2], [1, 7, 2]])
    np.testing.assert_array_equal(weights, [[1, 1, 1], [0, 1, 1]])


def test_stream_windows_rejects_short_stream():
    with pytest.raises(ValueError, match="at least two tokens"):
        stream_windows(np.array([1], np.int32), seq_len=3)


def test_stream_dataset_matches_windows():
    lines = ["a b c", "d", "b c a d e"]
    vocab = WordTokenizer.build(lines)
    ids = stream_ids(lines, vocab)
    assert ids.tolist() == [i for line in lines for i in vocab.encode(line)]
    expected = stream_windows(ids, 4, 3, vocab.bos_id)
    batches = list(stream_dataset(lines, vocab, batch_size=2, seq_len=4, context=3))
    for got, want in zip(zip(*batches), expected):
        np.testing.assert_array_equal(np.concatenate([g.numpy() for g in got]), want)
    total_weight = sum(float(w.numpy().sum()) for _, _, w in batches)
    assert total_weight == sum(len(line.split()) + 1 for line in lines)


# ---- sentence dataset -------------------------------------------------------------------
def _varied_corpus(n=300, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    return [" ".join(rng.choice(words, size=rng.integers(1, 60))) for _ in range(n)]


def test_sentence_dataset_counts_every_target_once():
    lines = _varied_corpus()
    vocab = WordTokenizer.build(lines)
    total_weight, seen = 0.0, []
    for x, y, w in sentence_dataset(lines, vocab, batch_size=8):
        x, y, w = x.numpy(), y.numpy(), w.numpy()
        assert x.shape == y.shape == w.shape
        np.testing.assert_array_equal(x[:, 0], vocab.bos_id)
        np.testing.assert_array_equal(w, (y != 0).astype("float32"))
        assert not np.any(y == vocab.bos_id)
        total_weight += w.sum()
        for xi, yi, wi in zip(x, y, w):
            n = int(wi.sum())
            np.testing.assert_array_equal(xi[1:n], yi[: n - 1])  # targets are inputs shifted
            seen.append(vocab.decode(yi[:n]))
    assert total_weight == sum(len(line.split()) for line in lines) + len(lines)
    assert sorted(seen) == sorted(lines)


def test_sentence_dataset_padding_is_small():
    lines = _varied_corpus()
    vocab = WordTokenizer.build(lines)
    real = padded = 0
    for _, _, w in sentence_dataset(lines, vocab, batch_size=8):
        real += w.numpy().sum()
        padded += w.numpy().size
    fraction = 1 - real / padded
    # Unbucketed batches of 8 random-length lines would waste far more of the positions.
    assert fraction < 0.2, fraction


def test_sentence_dataset_max_length():
    vocab = WordTokenizer.build(["a b c d e f"])
    (x, y, w), = list(sentence_dataset(["a b c d e f"], vocab, batch_size=4, max_length=3))
    assert x.shape == (1, 3)
    np.testing.assert_array_equal(x.numpy()[0], vocab.encode("a b c")[:3])
    np.testing.assert_array_equal(y.numpy()[0], vocab.encode("a b c")[1:4])
