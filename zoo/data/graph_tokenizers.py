"""The tokenizer family's in-graph side: each tokenizer of `zoo.data.tokenizers` as TensorFlow ops,
so that an export (`zoo.export`) tokenises inside the graph TF Serving runs. A tokenizer's
`graph_tokenizer(asset_dir)` returns one of these; this module imports nothing of the zoo.

`zoo.data.vocab.WordTokenizer.encode` splits a line with Python's `str.split()`, and
`CharTokenizer.encode` takes the characters of `line.strip()` (a space becoming U+2581,
any other whitespace character dropped). The ops here reproduce both exactly:

- the input bytes are first decoded as UTF-8 with every invalid sequence replaced by U+FFFD,
  which is what `bytes.decode("utf-8", errors="replace")` gives, so bytes that are not UTF-8 end
  up as unknown words instead of an error;
- "whitespace" is Python's: the 29 code points for which `str.isspace()` is true (ASCII
  whitespace, the separators \\x1c–\\x1f, U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028,
  U+2029, U+202F, U+205F, U+3000), not only the ASCII whitespace `tf.strings.split` knows;
- words are looked up in a `tf.lookup.StaticHashTable` initialised from the vocabulary file (a
  SavedModel asset), unknown words going to `<unk>`.

Only core ops are used (`UnicodeTranscode`, `StaticRegexReplace`/`RegexFullMatch`,
`StringSplitV2`, `UnicodeDecode`, hash tables), so stock TF Serving loads the result; nothing
from tensorflow-text is needed.

`SubwordGraphTokenizer` (below) is the exception: a SentencePiece subword tokenizer runs
tensorflow-text's ops (`SentencepieceOp`, `SentencepieceTokenizeOp` and `NormalizeUTF8` in an
export's graph; `SentencepieceDetokenizeOp` for `decode`), so the server must have them (TF
Serving's model server links them in; in Python, `import tensorflow_text` before
`tf.saved_model.load`).
"""

import functools
import sys

import numpy as np
import tensorflow as tf

REPLACEMENT_CHARACTER = 0xFFFD
SPACE_MARK = "\u2581"  # CharTokenizer's stand-in for a space


@functools.cache  # one scan of every code point per process
def python_whitespace():
    """Every code point that `str.isspace()` (and so `str.split()`) treats as whitespace."""
    return tuple(c for c in range(sys.maxunicode + 1) if chr(c).isspace())


def _character_class(code_points):
    """An RE2 character class (`[\\x{9}-\\x{d}…]`) matching exactly `code_points`."""
    ranges, start = [], None
    for c in sorted(code_points):
        if start is not None and c == end + 1:
            end = c
            continue
        if start is not None:
            ranges.append((start, end))
        start = end = c
    ranges.append((start, end))
    parts = [f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


WHITESPACE = _character_class(python_whitespace())


def decode_utf8(text):
    """`bytes.decode("utf-8", errors="replace")` for a string tensor: valid UTF-8 unchanged,
    each invalid sequence replaced by U+FFFD."""
    return tf.strings.unicode_transcode(
        text, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
        replacement_char=REPLACEMENT_CHARACTER, replace_control_characters=False,
    )


def split_words(text):
    """`line.split()` of each line of `text` ([batch] strings) → ragged [batch, words]."""
    text = tf.strings.regex_replace(decode_utf8(text), WHITESPACE, " ")
    return tf.strings.split(text)  # sep=None: runs of spaces, no empty words


def split_characters(text):
    """`CharTokenizer`'s tokens of each line: the characters of `line.strip()`, a space as
    U+2581, any other whitespace character dropped → ragged [batch, characters]."""
    chars = tf.strings.unicode_split(decode_utf8(text), "UTF-8")
    is_space = tf.strings.regex_full_match(chars.flat_values, WHITESPACE)
    solid = tf.cast(tf.logical_not(is_space), tf.int32)
    dense = chars.with_flat_values(solid).to_tensor(0)
    # inside the strip: some non-whitespace character at or before, and at or after, the position
    inside = tf.logical_and(tf.math.cumsum(dense, axis=1) > 0,
                            tf.math.cumsum(dense, axis=1, reverse=True) > 0)
    inside = tf.RaggedTensor.from_tensor(inside, lengths=chars.row_lengths())
    is_blank = tf.equal(chars.flat_values, " ")
    keep = tf.logical_and(inside.flat_values, tf.logical_or(tf.logical_not(is_space), is_blank))
    marked = chars.with_flat_values(tf.where(is_blank, SPACE_MARK, chars.flat_values))
    return tf.ragged.boolean_mask(marked, chars.with_flat_values(keep))


class Tokenizer:
    """Words (or characters) → ids and ids → words, from a vocabulary file, in the graph.

    `vocabulary_file` holds one token per line, a token's id being its line number, as
    `WordTokenizer.save` writes it. The two lookup tables (`tables`) must be tracked by the object
    saved with `tf.saved_model.save` (`zoo.export.saved_model` sets them as an attribute of its
    `tf.Module` root), so that the save ships the file as an asset (`assets/vocabulary.txt`) and
    the loaded tables read it from there.
    """

    def __init__(self, vocabulary, vocabulary_file):
        self.kind = vocabulary.kind  # "word" or "char"
        self.size = len(vocabulary)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (
            vocabulary.pad_id, vocabulary.bos_id, vocabulary.eos_id, vocabulary.unk_id)
        whole_line, line_number = tf.lookup.TextFileIndex.WHOLE_LINE, tf.lookup.TextFileIndex.LINE_NUMBER
        self.word_to_id = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(vocabulary_file, tf.string, whole_line, tf.int64, line_number,
                                          vocab_size=self.size),
            default_value=self.unk_id,
        )
        self.id_to_word = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(vocabulary_file, tf.int64, line_number, tf.string, whole_line,
                                          vocab_size=self.size),
            default_value="",
        )

    @property
    def tables(self):
        return [self.word_to_id, self.id_to_word]

    def tokens(self, text):
        return split_characters(text) if self.kind == "char" else split_words(text)

    def encode(self, text):
        """Ragged [batch, tokens] int32 ids of each line's words, without `<s>` / `</s>`."""
        tokens = self.tokens(text)
        return tokens.with_flat_values(tf.cast(self.word_to_id.lookup(tokens.flat_values), tf.int32))

    def decode(self, ids):
        """The token of each id (any shape); "" for an id outside the vocabulary."""
        return self.id_to_word.lookup(tf.cast(ids, tf.int64))


# --- The tokenizer family's in-graph side (`zoo.data.tokenizers`) --------------------------
#
# Every tokenizer's `graph_tokenizer(asset_dir)` returns an object with one interface, for the
# export's `tf.function`s:
#   kind, size, pad_id, bos_id, eos_id, unk_id;
#   encode(text [batch] tf.string) -> tf.RaggedTensor int32 [batch, tokens], without <s> / </s>,
#       the ids of Python's `encode(line)[1:-1]`;
#   decode(ids [batch, tokens], dense or ragged) -> tf.string [batch], Python's `decode(row)`
#       (<pad>, <s>, </s> and ids outside the vocabulary dropped);
#   token_texts(ids, any shape) -> tf.string, Python's `token_texts` per id ("" outside);
#   resources: the trackable objects (lookup tables, the SentencePiece model) that the object
#       given to `tf.saved_model.save` must reference.


def _as_ragged(ids):
    ids = tf.cast(ids, tf.int64)
    if isinstance(ids, tf.RaggedTensor):
        return ids
    return tf.RaggedTensor.from_tensor(ids)


def _kept(ids, size, first):
    """The ids of each row in [first, size): the reserved and out-of-range ones dropped."""
    ids = _as_ragged(ids)
    keep = ids.with_flat_values((ids.flat_values >= first) & (ids.flat_values < size))
    return tf.ragged.boolean_mask(ids, keep)


def unfinished_characters(byte_values):
    """`zoo.data.tokenizers.unfinished_character` for each row of `byte_values`, <int32>[batch, 4]:
    each row's last 4 ids as bytes (-1 for a piece that is not a byte, or before the row's
    start); <int32>[batch]."""
    done = tf.zeros_like(byte_values[:, 0], tf.bool)
    drop = continuations = tf.zeros_like(byte_values[:, 0])
    for k in range(4):  # from the last id back
        value = byte_values[:, 3 - k]
        lead = value >= 0xC0
        length = tf.where(value < 0xE0, 2, tf.where(value < 0xF0, 3, tf.where(value < 0xF8, 4, 1)))
        drop = tf.where(~done & lead & (continuations + 1 < length), k + 1, drop)
        continuations += tf.cast(~done & (value >= 0x80) & ~lead, tf.int32)
        done |= (value < 0x80) | lead
    return drop


class GraphTokenizer:
    """The family's in-graph interface over the word / character `Tokenizer` above, which it
    wraps (`inner`, whose `decode` is per id, as `zoo.export.signatures` uses it)."""

    def __init__(self, tokenizer):
        self.inner = tokenizer
        self.kind, self.size = tokenizer.kind, tokenizer.size
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (
            tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id)

    @property
    def resources(self):
        return self.inner.tables

    @property
    def tables(self):
        return self.inner.tables

    def encode(self, text):
        return self.inner.encode(text)

    def token_texts(self, ids):
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.token_texts(ids.flat_values))
        texts = self.inner.decode(ids)
        return tf.strings.regex_replace(texts, SPACE_MARK, " ") if self.kind == "char" else texts

    def decode(self, ids, whole_characters=False):  # words and characters are always whole
        ids = _kept(ids, self.size, self.eos_id + 1)
        tokens = ids.with_flat_values(self.inner.decode(ids.flat_values))
        if self.kind == "char":
            return tf.strings.regex_replace(tf.strings.reduce_join(tokens, axis=1), SPACE_MARK, " ")
        return tf.strings.reduce_join(tokens, axis=1, separator=" ")


# Python's whitespace and U+2581, SentencePiece's word-boundary mark, which it would give back as
# a space: `zoo.data.tokenizers.normalize_subword` turns both into spaces.
SUBWORD_SPACES = _character_class(python_whitespace() + (ord(SPACE_MARK),))


def normalize_subword_in_graph(text):
    """`zoo.data.tokenizers.normalize_subword` as TensorFlow ops, for a string tensor: invalid
    UTF-8 replaced by U+FFFD, Unicode NFC, runs of whitespace (or U+2581) as one space, stripped."""
    import tensorflow_text as tft  # its ops are loaded for subword models only

    text = tft.normalize_utf8(decode_utf8(text), "NFC")
    text = tf.strings.regex_replace(text, SUBWORD_SPACES + "+", " ")
    return tf.strings.strip(text)  # only spaces are left to strip


class SubwordGraphTokenizer:
    """A `zoo.data.tokenizers.SubwordTokenizer` in the graph: `tensorflow_text`'s
    SentencePiece ops with the model's bytes embedded (no asset file), and a `tf.gather`
    through the id order between SentencePiece's ids and the zoo's.

    The ops come from tensorflow-text: a server loading the SavedModel needs them (TF Serving
    built with them, or `import tensorflow_text` before `tf.saved_model.load`)."""

    kind = "subword"

    def __init__(self, model_proto, sentencepiece_to_id, id_to_sentencepiece, texts, unk_id, byte_values):
        import tensorflow_text as tft  # its ops are loaded for subword models only

        self.size = len(id_to_sentencepiece)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, int(unk_id)
        self.sentencepiece = tft.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)
        self._to_id = np.asarray(sentencepiece_to_id, np.int32)
        self._to_sentencepiece = np.asarray(id_to_sentencepiece, np.int32)
        self._texts = list(texts)
        self._byte_values = np.asarray(byte_values, np.int32)  # SubwordTokenizer.byte_values
        # Which ids start a word (`SubwordTokenizer.word_index`): the pieces whose SentencePiece
        # text starts with the boundary mark U+2581; not the reserved ids, not byte pieces.
        import sentencepiece as spm

        processor = spm.SentencePieceProcessor(model_proto=bytes(model_proto))
        self._starts_word = np.array(
            [i >= 0 and processor.id_to_piece(int(i)).startswith(SPACE_MARK) for i in self._to_sentencepiece],
            dtype=bool)

    @property
    def resources(self):
        return [self.sentencepiece]

    def encode(self, text):
        pieces = self.sentencepiece.tokenize(normalize_subword_in_graph(tf.reshape(text, [-1])))
        return pieces.with_flat_values(tf.gather(tf.constant(self._to_id), pieces.flat_values))

    def decode(self, ids, whole_characters=False):
        """`SubwordTokenizer.decode` of each row, `whole_characters` too."""
        ids = _kept(ids, self.size, self.eos_id + 1)
        if whole_characters:
            lengths = ids.row_lengths()
            position = lengths[:, None] + tf.range(-4, 0, dtype=lengths.dtype)[None, :]  # each row's last 4 ids
            inside = position >= 0
            flat = tf.concat([ids.flat_values, tf.constant([self.pad_id], ids.dtype)], 0)  # before a row: <pad>, -1
            index = tf.where(inside, ids.row_starts()[:, None] + position,
                             tf.size(ids.flat_values, out_type=lengths.dtype))
            last = tf.gather(tf.constant(self._byte_values), tf.gather(flat, index))
            keep = lengths - tf.cast(unfinished_characters(last), lengths.dtype)
            ids = tf.ragged.boolean_mask(ids, tf.ragged.range(lengths, row_splits_dtype=lengths.dtype) < keep[:, None])
        pieces = ids.with_flat_values(tf.gather(tf.constant(self._to_sentencepiece), ids.flat_values))
        return self.sentencepiece.detokenize(pieces)

    def token_texts(self, ids):
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.token_texts(ids.flat_values))
        ids = tf.cast(ids, tf.int64)
        inside = (ids >= 0) & (ids < self.size)
        texts = tf.gather(tf.constant(self._texts), tf.where(inside, ids, 0))
        return tf.where(inside, texts, "")

    def starts_word(self, ids):
        """Whether each id (any shape, dense or ragged) is a piece that starts a word: its text
        begins with the boundary mark (a leading space in `token_texts`). False for the reserved
        ids, byte pieces, continuation pieces and ids outside the vocabulary."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.starts_word(ids.flat_values))
        ids = tf.cast(ids, tf.int64)
        inside = (ids >= 0) & (ids < self.size)
        return tf.gather(tf.constant(self._starts_word), tf.where(inside, ids, 0)) & inside


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    from zoo.deprecation import former_name

    return former_name(__name__, name)
