"""The training data's tokenizer choice (zoo/training/data.py): a benchmark's protocol fixes its word
vocabulary, a character preset keeps its characters, other text gets a learned subword vocabulary.
(The windows and corpora: tokenization_test.py and trainer_test.py.)"""

import pytest

from zoo.training.data import choose_tokenizer, evaluation_windows, fixed_protocol


def test_the_choice_follows_the_corpus_and_the_preset(tiny_corpus):
    assert fixed_protocol("ptb") == "the Penn Treebank" and fixed_protocol(tiny_corpus) is None
    assert choose_tokenizer("ptb", "word") == "word"
    assert choose_tokenizer(tiny_corpus, "char") == "char"
    assert choose_tokenizer(tiny_corpus, "word") == "subword"
    assert choose_tokenizer(tiny_corpus, "word", tokenizer="word") == "word"
    assert choose_tokenizer(tiny_corpus, "word", vocabulary_size=500) == "subword"


@pytest.mark.parametrize("data, kwargs, message", [
    ("{corpus}", {"tokenizer": "bpe"}, "Unknown tokenizer 'bpe'; expected one of word, char, subword"),
    ("ptb", {"tokenizer": "char"}, "The Penn Treebank's published protocol fixes its word vocabulary"),
    ("{corpus}", {"tokenizer": "word", "vocabulary_size": 500}, "not of a word one; use --max-vocabulary"),
])
def test_a_choice_the_corpus_or_kind_forbids_is_refused_by_name(data, kwargs, message, tiny_corpus):
    with pytest.raises(ValueError, match=message):
        choose_tokenizer(data.replace("{corpus}", tiny_corpus), "word", **kwargs)


def test_evaluation_windows_pad_to_whole_global_batches_with_unscored_windows(word_tokenizer, tiny_lines):
    inputs, targets, weights = evaluation_windows(tiny_lines, word_tokenizer, seq_len=4, context=0, global_batch_size=4)
    # 16 words and 4 </s>: 20 scored targets in 6 windows, padded with unscored windows to 8
    assert inputs.shape == targets.shape == weights.shape == (8, 4)
    assert weights.sum() == 20 and not weights[6:].any()
