"""Tests of vocabularies, corpora and the tf.data pipelines."""

import numpy as np
import pytest

from zoo.data import CharTokenizer, WordTokenizer, read_lines, sentence_dataset, stream_dataset
from zoo.data.pipeline import stream_ids, stream_windows
from zoo.data.tokenizers import load_tokenizer
from zoo.data.vocab import SPECIALS

LINES = ["b a c", "a b", "a", "e d"]  # a:3 b:2 c:1 d:1 e:1


# ---- WordTokenizer -----------------------------------------------------------------------
def test_build_sorts_by_frequency_after_specials():
    vocab = WordTokenizer.build(LINES)
    assert vocab.tokens == ["<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "d", "e"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    assert len(vocab) == 9


def test_build_ignores_specials_in_text():
    vocab = WordTokenizer.build(["a <unk> <s> a </s> b"])
    assert vocab.tokens == list(SPECIALS) + ["a", "b"]


def test_build_min_count():
    assert WordTokenizer.build(LINES, min_count=2).tokens == list(SPECIALS) + ["a", "b"]
    assert WordTokenizer.build(LINES, min_count=3).tokens == list(SPECIALS) + ["a"]
    assert WordTokenizer.build(LINES, min_count=4).tokens == list(SPECIALS)


def test_build_max_size_counts_specials():
    vocab = WordTokenizer.build(LINES, max_size=6)
    assert vocab.tokens == list(SPECIALS) + ["a", "b"]
    assert len(vocab) == 6
    # ties (c, d, e all once) are broken alphabetically
    assert WordTokenizer.build(LINES, max_size=7).tokens[-1] == "c"
    with pytest.raises(ValueError, match="max_size must be > 4"):
        WordTokenizer.build(LINES, max_size=4)


def test_encode_and_decode():
    vocab = WordTokenizer.build(LINES)
    assert vocab.encode("a zzz c") == [1, 4, 3, 6, 2]
    assert vocab.encode("a b", add_bos=False) == [4, 5, 2]
    assert vocab.encode("a b", add_eos=False) == [1, 4, 5]
    assert vocab.decode([1, 4, 3, 6, 2]) == "a <unk> c"
    assert vocab.decode([1, 4, 2], strip_specials=False) == "<s> a </s>"


def test_vocabulary_rejects_bad_token_lists():
    with pytest.raises(ValueError, match="must start with"):
        WordTokenizer(["a", "b"])
    with pytest.raises(ValueError, match="Repeated tokens"):
        WordTokenizer(list(SPECIALS) + ["a", "a"])


def test_save_load_round_trip(tmp_path):
    vocab = WordTokenizer.build(LINES + ["x y z"])
    path = vocab.save(str(tmp_path))
    assert path.endswith("vocabulary.txt")
    assert WordTokenizer.load(str(tmp_path)) == vocab
    assert WordTokenizer.load(path) == vocab
    assert load_tokenizer(str(tmp_path)) == vocab
    assert type(load_tokenizer(str(tmp_path))) is WordTokenizer


def test_character_vocabulary_round_trip(tmp_path):
    vocab = CharTokenizer.build(["ab a", "ba"])
    assert vocab.tokens == list(SPECIALS) + ["a", "b", "\u2581"]
    ids = vocab.encode("ab a")
    assert ids == [1, 4, 5, 6, 4, 2]
    assert vocab.decode(ids) == "ab a"
    vocab.save(str(tmp_path))
    loaded = load_tokenizer(str(tmp_path))
    assert isinstance(loaded, CharTokenizer)
    assert loaded == vocab
    assert loaded.decode(loaded.encode("ba ab")) == "ba ab"


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


# ---- corpora -----------------------------------------------------------------------------
def test_read_ptb_valid():
    lines = read_lines("ptb", "valid")
    assert len(lines) == 3370
    assert all(line == line.strip() and line for line in lines)
    assert read_lines("ptb", "validation") == lines


def test_read_lines_missing_path(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match=r"does not exist"):
        read_lines(missing)


def test_read_lines_empty_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n")
    with pytest.raises(ValueError, match=r"is empty"):
        read_lines(str(empty))


def test_read_lines_directory_and_file_splits(tmp_path):
    (tmp_path / "train.txt").write_text("a b\n\n c \n")
    (tmp_path / "valid.txt").write_text("d\n")
    assert read_lines(str(tmp_path), "train") == ["a b", "c"]
    assert read_lines(str(tmp_path), "valid") == ["d"]
    with pytest.raises(ValueError, match="No test file"):
        read_lines(str(tmp_path), "test")
    with pytest.raises(ValueError, match="Unknown split"):
        read_lines(str(tmp_path), "trian")
    single = tmp_path / "all.txt"
    single.write_text("\n".join(f"line {i}" for i in range(40)))
    assert read_lines(str(single), "valid") == ["line 0", "line 20"]
    assert read_lines(str(single), "test") == ["line 10", "line 30"]
    assert len(read_lines(str(single), "train")) == 36


def test_read_lines_refuses_bytes_that_are_not_utf8_naming_line_and_byte(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("caf\u00e9 ok\nfine line\nbad \xe9t\xe9 here\n".encode("utf-8").replace(b"\xc3\xa9t", b"\xe9t"))
    with pytest.raises(ValueError) as error:
        read_lines(str(tmp_path), "train")
    message = str(error.value)
    assert message.startswith(f"The corpus file {path} is not UTF-8: line 3, byte 5 is 0xe9")
    assert "iconv" in message and "\n" not in message


def test_read_lines_drops_lines_of_control_characters_and_says_when_none_is_left(tmp_path):
    (tmp_path / "train.txt").write_text("\x00\x01\n\x07 \x1b\n ok \u200b\n")
    assert read_lines(str(tmp_path), "train") == ["ok \u200b"]
    (tmp_path / "valid.txt").write_text("\x00\x01\n\t\x07\n\n")
    with pytest.raises(ValueError, match=r"is empty: it has no usable line \(every line is blank or only control"):
        read_lines(str(tmp_path), "valid")


def test_unknown_share_counts_the_words_a_closed_vocabulary_reads_as_unk():
    from zoo.data.corpus import unknown_note, unknown_share

    vocab = WordTokenizer.build(["the cat sat", "the dog"])
    # 2 of 8 words are not in the vocabulary, and "<unk>" written in the text is one too
    assert unknown_share(["the cat flew", "a dog sat <unk> the"], vocab) == 3 / 8
    assert unknown_share(["the cat"], vocab) == 0.0
    assert unknown_share(["the cat"], CharTokenizer.build(["the cat"])) is None
    assert unknown_note(3 / 8).startswith("37.50% of the words are <unk>") and unknown_note(None) == ""
