"""The in-graph word and character tokenisers (the one implementation, which the Python API runs
too) against Python's own `str.split()` / `str.strip()` on awkward text: every Python whitespace
character, separators TensorFlow's own split does not know, bytes that are not UTF-8, reserved
tokens typed as words."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.data.graph_tokenizers import WHITESPACE, python_whitespace
from zoo.data.vocab import CharTokenizer, WordTokenizer

LINES = [
    "the cat sat", "", " ", "  the   cat  ", "\tthe\ncat\r\n", "the\x1ccat\x1dsat\x1eon\x1fmat",
    "the\u00a0cat\u2028sat\u2029on\u3000mat\u0085x\u1680y\u2000z\u200aw\u202fv\u205fu",
    "the\u200bcat", "\ufeffthe cat", "<s> the </s> <unk> <pad>", "zebra", "the ca t", "é the é",
    "\x00the", "the cat\x0bsat\x0con",
]
BYTES = [b"\xff\xfe the", b"caf\xe9 the", b"the \xc3", b"\xe2\x82 cat \xe2\x82\xac", b"\xed\xa0\x80 the"]


def test_whitespace_is_pythons():
    assert len(python_whitespace()) == 29
    text = "".join(chr(c) for c in range(0x3001))
    got = tf.strings.regex_replace(tf.constant([text]), WHITESPACE, "").numpy()[0].decode()
    assert got == "".join(c for c in text if not c.isspace())


def python_words(vocabulary, text):
    """The oracle: Python's `str.split()` looked up in the vocabulary."""
    return [vocabulary.index.get(w, vocabulary.unk_id) for w in text.split()]


def python_characters(vocabulary, text):
    """The oracle: the characters of `text.strip()`, a space as U+2581, other whitespace dropped."""
    chars = ["\u2581" if c == " " else c for c in text.strip()]
    return [vocabulary.index.get(c, vocabulary.unk_id) for c in chars if not c.isspace()]


def test_word_ids_are_pythons_split():
    vocabulary = WordTokenizer.build(["the cat sat on the mat", "é ca t", "\u200bcat"])
    graph = vocabulary.graph
    got = graph.encode(tf.constant(LINES + BYTES)).to_list()
    want = [python_words(vocabulary, line) for line in LINES]
    want += [python_words(vocabulary, b.decode("utf-8", "replace")) for b in BYTES]
    assert got == want
    assert [row[1:-1] for row in vocabulary.encode_batch(LINES + BYTES)] == want  # the Python API: the same ops
    assert got[9] == [1, 4, 2, 3, 0]  # "<s> the </s> <unk> <pad>" typed in are those ids, as in Python
    assert graph.token_names(tf.constant([[4, 2], [60, -1]])).numpy().tolist() == [[b"the", b"</s>"], [b"", b""]]


def test_character_ids_are_pythons_strip():
    vocabulary = CharTokenizer.build(["the cat sat", "é\u200b"])
    got = vocabulary.graph.encode(tf.constant(LINES + BYTES)).to_list()
    want = [python_characters(vocabulary, line) for line in LINES]
    want += [python_characters(vocabulary, b.decode("utf-8", "replace")) for b in BYTES]
    assert got == want
    assert [row[1:-1] for row in vocabulary.encode_batch(LINES + BYTES)] == want
    assert got[3] == python_characters(vocabulary, "the   cat")  # stripped, inner spaces kept


@pytest.mark.parametrize("line", ["", "x" * 5, "a b"])
def test_a_batch_of_one_and_of_many_agree(line):
    vocabulary = WordTokenizer.build(["a b x"])
    alone = vocabulary.graph.encode(tf.constant([line])).to_list()[0]
    many = vocabulary.graph.encode(tf.constant(["a", line, ""])).to_list()[1]
    assert alone == many == python_words(vocabulary, line)
    assert np.all(np.array(alone) >= 0)
