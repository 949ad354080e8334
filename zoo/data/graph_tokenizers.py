"""The tokenizers' encoding and decoding, as TensorFlow ops: the one implementation of each, which
a tokenizer's Python API (`zoo.data.base_tokenizer.Tokenizer`) runs eagerly and an export
(`zoo.export`) traces into the graph TF Serving runs. This module imports nothing of the zoo.

Words are Python's `str.split()` of a line and characters those of `line.strip()` (a space
becoming U+2581, any other whitespace character dropped), computed here as ops:

- the input bytes are first decoded as UTF-8 with every invalid sequence replaced by U+FFFD,
  so bytes that are not UTF-8 end up as unknown words instead of an error;
- "whitespace" is Python's: the 29 code points for which `str.isspace()` is true (ASCII
  whitespace, the separators \\x1c–\\x1f, U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028,
  U+2029, U+202F, U+205F, U+3000), not only the ASCII whitespace `tf.strings.split` knows;
- words are looked up in a `tf.lookup.StaticHashTable` holding the vocabulary, unknown words
  going to `<unk>`.

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
from typing import Protocol

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


GRAPH_MEMBERS = ("size", "pad_id", "bos_id", "eos_id", "unk_id", "resources", "encode", "decode", "normalize",
                 "token_texts", "token_names", "starts_word")


class GraphTokenizer(Protocol):
    """The in-graph interface: what a tokenizer's `graph` (`zoo.data.Tokenizer.graph`) is, which
    its Python API runs eagerly and an export traces. Ids are int32 or int64, text tf.string."""

    size: int
    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int

    @property
    def resources(self) -> list:
        """The trackable objects (lookup tables, the SentencePiece model) that the object given to
        `tf.saved_model.save` must reference."""

    def encode(self, text: tf.Tensor) -> tf.RaggedTensor:
        """[batch] text → int32 ids [batch, (tokens)], without `<s>` / `</s>`."""

    def decode(self, ids: tf.Tensor | tf.RaggedTensor, whole_characters: bool = False) -> tf.Tensor:
        """ids [batch, tokens], dense or ragged → text [batch]; `<pad>`, `<s>`, `</s>` and ids outside
        the vocabulary dropped; with `whole_characters`, bytes at the end that begin a character
        without finishing it left out."""

    def normalize(self, text: tf.Tensor) -> tf.Tensor:
        """[batch] text → what `decode(encode(text))` gives when every token is known."""

    def token_texts(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """The readable text of each id (any shape); "" outside the vocabulary."""

    def token_names(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """The vocabulary's entry of each id (any shape); "" outside the vocabulary."""

    def starts_word(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """Whether each id (any shape) begins a whitespace-separated word."""


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
    """How many of each row's last bytes begin a UTF-8 character that they do not finish (the lead
    byte and the continuation bytes after it, when fewer than the lead byte announces; else 0), for
    `decode(whole_characters=True)`. `byte_values`: <int32>[batch, 4], each row's last 4 ids as
    bytes (-1 for a piece that is not a byte, or before the row's start); <int32>[batch]."""
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


class WordGraphTokenizer:
    """`zoo.data.vocab.WordTokenizer` as TensorFlow ops: the one implementation of its encoding
    and decoding, run eagerly by the Python API and traced into an export.

    `tokens`: the vocabulary, a token's id being its position. Two lookup tables hold it
    (`resources`, which the object given to `tf.saved_model.save` must track; their keys and
    values are constants of the graph, so an export needs no vocabulary file)."""

    def __init__(self, tokens, pad_id, bos_id, eos_id, unk_id):
        self.size = len(tokens)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = pad_id, bos_id, eos_id, unk_id
        keys, values = tf.constant(list(tokens), tf.string), tf.range(self.size, dtype=tf.int64)
        self.word_to_id = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, values), default_value=self.unk_id)
        self.id_to_word = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(values, keys), default_value="")

    @property
    def resources(self):
        return [self.word_to_id, self.id_to_word]

    def split(self, text):
        """The tokens of each line: `line.split()` → ragged [batch, words]."""
        return split_words(text)

    def join(self, tokens):
        """Each row of ragged `tokens` as one string: the inverse of `split` for known tokens."""
        return tf.strings.reduce_join(tokens, axis=1, separator=" ")

    def encode(self, text):
        tokens = self.split(text)
        return tokens.with_flat_values(tf.cast(self.word_to_id.lookup(tokens.flat_values), tf.int32))

    def normalize(self, text):
        return self.join(self.split(text))

    def token_names(self, ids):
        """The vocabulary's entry of each id (any shape, dense or ragged); "" outside it."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.token_names(ids.flat_values))
        return self.id_to_word.lookup(tf.cast(ids, tf.int64))

    def token_texts(self, ids):
        return self.token_names(ids)

    def decode(self, ids, whole_characters=False):  # words and characters are always whole
        ids = _kept(ids, self.size, self.eos_id + 1)
        return self.join(ids.with_flat_values(self.token_names(ids.flat_values)))

    def starts_word(self, ids):
        """Every id in the vocabulary past the reserved ones is a word of its own."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.starts_word(ids.flat_values))
        return (ids > self.eos_id) & (ids < self.size)


class CharGraphTokenizer(WordGraphTokenizer):
    """`zoo.data.vocab.CharTokenizer` as TensorFlow ops: the characters of `line.strip()`, a space
    as U+2581 (as the vocabulary stores it, and as `token_names` gives it), any other whitespace
    character dropped."""

    def split(self, text):
        return split_characters(text)

    def join(self, tokens):
        return tf.strings.regex_replace(tf.strings.reduce_join(tokens, axis=1), SPACE_MARK, " ")

    def token_texts(self, ids):
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.token_texts(ids.flat_values))
        return tf.strings.regex_replace(self.token_names(ids), SPACE_MARK, " ")


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


def _sentencepiece_ops():
    from tensorflow_text.python.ops import sentencepiece_tokenizer

    return sentencepiece_tokenizer


def shared_sentencepiece_model(model_proto):
    """tensorflow-text's SentencePiece model resource, named by the model's SHA-256.

    tensorflow-text creates it private to its kernel, and eager TensorFlow destroys its cached
    kernels whenever the global seed is set (`keras.utils.set_random_seed`, `tf.random.set_seed`):
    a tokenizer built before would then find its model gone ("Resource … SentencepieceOp does not
    exist"). A resource with a shared name outlives its kernel, and the next kernel finds it again;
    the same model always gets the same name, so sharing it is sharing equal data. The name is also
    what an export's graph creates it under."""
    import hashlib

    return _shared_model_class()(model_proto, "zoo_sentencepiece_" + hashlib.sha256(model_proto).hexdigest()[:32])


@functools.cache
def _shared_model_class():
    """The resource class (built on first use: tensorflow-text is imported for subword models only)."""
    ops = _sentencepiece_ops()

    class SharedSentencepieceModel(ops._SentencepieceModelResource):
        def _create_resource(self):
            with tf.name_scope("SentenceTokenizerInitializer"):
                return ops.gen_sentencepiece_tokenizer.sentencepiece_op(model=self._model, shared_name=self._name)

    return SharedSentencepieceModel


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
        self.sentencepiece._model_resource = shared_sentencepiece_model(bytes(model_proto))
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

    def normalize(self, text):
        return normalize_subword_in_graph(text)

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

    def token_names(self, ids):
        """A piece's name is its readable text (`token_texts`)."""
        return self.token_texts(ids)

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
