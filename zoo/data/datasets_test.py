"""A named corpus' vocabulary (zoo/data/datasets.py): the treebank's own 10k words, shared between
calls, and a word or character vocabulary of any corpus' training split."""

from zoo.data import CharTokenizer, WordTokenizer
from zoo.data.datasets import build_tokenizer, ptb_tokenizer


def test_the_treebanks_vocabulary_is_its_10k_words_built_once():
    vocabulary = build_tokenizer("ptb")
    assert vocabulary is ptb_tokenizer()  # cached: the treebank is read once
    # the treebank's 10k (its <unk> and end of sentence, here the specials <unk> and </s>), <pad> and <s>
    assert len(vocabulary) == 10_000 + 2
    assert vocabulary.tokens[4] == "the"


def test_another_corpus_or_a_limit_builds_from_the_training_split(tiny_corpus):
    words = build_tokenizer(tiny_corpus)
    assert type(words) is WordTokenizer and words.tokens[4] == "the"  # the most frequent training word
    # "the" 12 times in train.txt, then a tie of 6 (a, cat, dog, sat) broken alphabetically
    assert build_tokenizer(tiny_corpus, max_size=6).tokens[4:] == ["the", "a"]
    chars = build_tokenizer(tiny_corpus, kind="char")
    assert type(chars) is CharTokenizer and "t" in chars.tokens and "the" not in chars.tokens
    assert build_tokenizer("ptb", min_count=2) is not ptb_tokenizer()
