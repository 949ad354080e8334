"""Word and character tokenizers (zoo/data/vocab.py): built by frequency after the specials,
encode and decode, and their save / load round trip."""

import pytest

from zoo.data import CharTokenizer, WordTokenizer
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
