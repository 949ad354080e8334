"""The in-graph tokenisers against `WordTokenizer.encode` / `CharTokenizer.encode` on awkward
text: every Python whitespace character, separators TensorFlow's own split does not know, bytes
that are not UTF-8, reserved tokens typed as words."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.data.graph_tokenizers import WHITESPACE, Tokenizer, python_whitespace
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


def _words_tokenizer(tmp_path, vocabulary):
    path = tmp_path / "vocabulary.txt"
    path.write_text("".join(t + "\n" for t in vocabulary.tokens), encoding="utf-8")
    return Tokenizer(vocabulary, str(path))


def test_word_ids_equal_vocabulary_encode(tmp_path):
    vocabulary = WordTokenizer.build(["the cat sat on the mat", "é ca t", "\u200bcat"])
    tokenizer = _words_tokenizer(tmp_path, vocabulary)
    got = tokenizer.encode(tf.constant(LINES + BYTES)).to_list()
    want = [vocabulary.encode(line, add_bos=False, add_eos=False) for line in LINES]
    want += [vocabulary.encode(b.decode("utf-8", "replace"), add_bos=False, add_eos=False) for b in BYTES]
    assert got == want
    assert got[9] == [1, 4, 2, 3, 0]  # "<s> the </s> <unk> <pad>" typed in are those ids, as in Python
    assert tokenizer.decode(tf.constant([[4, 2], [60, -1]])).numpy().tolist() == [[b"the", b"</s>"], [b"", b""]]


def test_character_ids_equal_character_vocabulary_encode(tmp_path):
    vocabulary = CharTokenizer.build(["the cat sat", "é\u200b"])
    tokenizer = _words_tokenizer(tmp_path, vocabulary)
    assert tokenizer.kind == "char"
    got = tokenizer.encode(tf.constant(LINES + BYTES)).to_list()
    want = [vocabulary.encode(line, add_bos=False, add_eos=False) for line in LINES]
    want += [vocabulary.encode(b.decode("utf-8", "replace"), add_bos=False, add_eos=False) for b in BYTES]
    assert got == want
    assert got[3] == vocabulary.encode("the   cat", add_bos=False, add_eos=False)  # stripped, inner spaces kept


@pytest.mark.parametrize("line", ["", "x" * 5, "a b"])
def test_a_batch_of_one_and_of_many_agree(tmp_path, line):
    vocabulary = WordTokenizer.build(["a b x"])
    tokenizer = _words_tokenizer(tmp_path, vocabulary)
    alone = tokenizer.encode(tf.constant([line])).to_list()[0]
    many = tokenizer.encode(tf.constant(["a", line, ""])).to_list()[1]
    assert alone == many == vocabulary.encode(line, add_bos=False, add_eos=False)
    assert np.all(np.array(alone) >= 0)
