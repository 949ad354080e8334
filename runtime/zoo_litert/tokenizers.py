"""The zoo's tokenizers without TensorFlow, read from the files a LiteRT export holds beside its
flatbuffer: the word and character tokenizers from `vocabulary.txt` in plain Python, the subword
tokenizer from `tokenizer.model` with the `sentencepiece` package. They give the ids the zoo's own
tokenizers give (`zoo.data`, whose encoding runs as TensorFlow ops), by the same rules:

- a line is `str`, or `bytes` read as UTF-8 (an invalid sequence as U+FFFD); a lone surrogate
  in a `str` is U+FFFD, as the zoo's tokenizers read it;
- word: the line's whitespace-separated words (`str.split()`), a word the vocabulary lacks as
  `<unk>`; decoding joins the words with single spaces;
- character: the characters of `line.strip()`, a space as U+2581, any other whitespace
  character dropped; decoding gives U+2581 back as a space;
- subword: Unicode NFC, runs of whitespace and U+2581 as one space, stripped, then
  SentencePiece's pieces (its own split; `sentencepiece` below 0.2.2 splits as the zoo's
  tensorflow-text does), each SentencePiece id mapped to the zoo's through `tokenizer.json`'s
  `order`; decoding is SentencePiece's.

Decoding drops `<pad>`, `<s>` and `</s>`; `whole_characters=True` (what `generate` writes) leaves
out bytes at the end that begin a UTF-8 character without finishing it.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
RESERVED = (PAD, BOS, EOS)
SPACE_MARK = "\u2581"
VOCABULARY_FILE, KIND_FILE, LINE_START_FILE = "vocabulary.txt", "vocabulary_kind.txt", "vocabulary_line_start.txt"
SUBWORD_MODEL, SUBWORD_CONFIG = "tokenizer.model", "tokenizer.json"
SURROGATES = re.compile("[\ud800-\udfff]")
SUBWORD_SPACES = re.compile(r"[\s\u2581]+")  # Python's whitespace (str.split's) and the boundary mark


def as_text(line: str | bytes) -> str:
    """`line` as the zoo's tokenizers read it: `bytes` as UTF-8 (an invalid sequence as U+FFFD),
    a lone surrogate of a `str` as U+FFFD.

    Returns:
        The text.

    Example:

    >>> as_text(b"caf\\xc3\\xa9 \\xff"), as_text("a\\ud800b")
    ('café �', 'a�b')
    """
    if isinstance(line, (bytes, bytearray)):
        return bytes(line).decode("utf-8", "replace")
    if not isinstance(line, str):
        raise TypeError(f"A line of text must be a str or bytes, got {type(line).__name__} {line!r}.")
    return SURROGATES.sub("\ufffd", line)


class Tokenizer:
    """What the runtime's tokenizers share: ids 0 `<pad>`, 1 `<s>`, 2 `</s>`, an `unk_id`, `len()`
    the number of ids; `encode` wraps a line in `<s> … </s>`, `decode` drops the reserved ids.
    A subclass gives `tokens_of` (a line's ids, unwrapped) and `text_of` (ids → text).

    Example:

    >>> tokenizer = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "the", "cat"])
    >>> isinstance(tokenizer, Tokenizer), tokenizer.encode("the  cat sat")
    (True, [1, 4, 5, 3, 2])
    """

    kind = ""
    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3
    scores_per_word = False  # a subword tokenizer's `score` sums its pieces per word
    never_encoded: tuple[int, ...] = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def tokens_of(self, text: str) -> list[int]:
        """The ids of one line (already `as_text`), without `<s>` / `</s>`."""
        raise NotImplementedError

    def text_of(self, ids: list[int], whole_characters: bool) -> str:
        """The text of ids that are all past the reserved ones."""
        raise NotImplementedError

    def encode(self, text: str | bytes, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        """The ids of one line, wrapped in `<s> … </s>` unless told otherwise.

        Returns:
            The ids.

        Example:

        >>> WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hi"]).encode("hi there", add_eos=False)
        [1, 4, 3]
        """
        return [self.bos_id] * add_bos + self.tokens_of(as_text(text)) + [self.eos_id] * add_eos

    def encode_batch(self, lines: Iterable[str | bytes], add_bos: bool = True, add_eos: bool = True) -> list[list[int]]:
        """`[encode(line, add_bos, add_eos) for line in lines]`.

        Returns:
            One id list per line.

        Example:

        >>> WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hi"]).encode_batch(["hi", ""])
        [[1, 4, 2], [1, 2]]
        """
        return [self.encode(line, add_bos, add_eos) for line in lines]

    def check_ids(self, ids: Iterable[int]) -> list[int]:
        """`ids` (one row) as a list of ints; one outside the vocabulary is refused in one sentence.

        Returns:
            The ids.

        Example:

        >>> WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"]).check_ids([1, 2])
        [1, 2]
        """
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if ids.ndim != 1 or ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"Token ids must be one row of whole numbers, got an array of shape {ids.shape} and "
                             f"dtype {ids.dtype}.")
        bad = ids[(ids < 0) | (ids >= len(self))]
        if bad.size:
            raise ValueError(f"Token id {int(bad[0])} is outside the vocabulary: ids must be in [0, {len(self) - 1}].")
        return [int(i) for i in ids]

    def decode(self, ids: Iterable[int], whole_characters: bool = False) -> str:
        """The text of `ids`, `<pad>`, `<s>` and `</s>` dropped; with `whole_characters`, bytes at the
        end that begin a UTF-8 character without finishing it left out (a subword model's).

        Returns:
            The text.

        Example:

        >>> WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hi"]).decode([1, 4, 3, 2])
        'hi <unk>'
        """
        return self.text_of([i for i in self.check_ids(ids) if i > self.eos_id], bool(whole_characters))


class WordTokenizer(Tokenizer):
    """A word vocabulary (`vocabulary.txt`, an id's token on its line): a line's words are
    `str.split()`'s, an unknown word is `<unk>`. `line_start` is `<s>`, or `</s>` for a model
    converted from fairseq (then `bos_id == eos_id`).

    Example:

    >>> tokenizer = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "the", "cat"])
    >>> tokenizer.encode("the bird"), tokenizer.decode([1, 4, 5, 2])
    ([1, 4, 3, 2], 'the cat')
    """

    kind = "word"

    def __init__(self, tokens: Sequence[str], line_start: str = BOS):
        self.tokens = list(tokens)
        if tuple(self.tokens[:4]) != (PAD, BOS, EOS, UNK):
            raise ValueError(f"A vocabulary must start with {(PAD, BOS, EOS, UNK)}, got {self.tokens[:4]}.")
        self.index = {token: i for i, token in enumerate(self.tokens)}
        self.bos_id = self.index[line_start]

    def __len__(self) -> int:
        return len(self.tokens)

    def tokens_of(self, text: str) -> list[int]:
        return [self.index.get(word, self.unk_id) for word in text.split()]

    def text_of(self, ids: list[int], whole_characters: bool) -> str:
        return " ".join(self.tokens[i] for i in ids)


class CharTokenizer(WordTokenizer):
    """Characters instead of words: the characters of `line.strip()`, a space as U+2581 (as the
    vocabulary stores it), any other whitespace character dropped.

    Example:

    >>> tokenizer = CharTokenizer(["<pad>", "<s>", "</s>", "<unk>", "a", "b", "\\u2581"])
    >>> tokenizer.encode(" ab\\tba "), tokenizer.decode([1, 4, 6, 5, 2])
    ([1, 4, 5, 5, 4, 2], 'a b')
    """

    kind = "char"

    def tokens_of(self, text: str) -> list[int]:
        return [self.index.get(SPACE_MARK if c == " " else c, self.unk_id) for c in text.strip()
                if c == " " or not c.isspace()]

    def text_of(self, ids: list[int], whole_characters: bool) -> str:
        return "".join(self.tokens[i] for i in ids).replace(SPACE_MARK, " ")


class SubwordTokenizer(Tokenizer):
    """A SentencePiece model (`tokenizer.model`) with the zoo's ids: 0–2 reserved, then
    SentencePiece id `order[i]` as id `i + 3` (`tokenizer.json`'s `order`). Its `<unk>` is never
    encoded (byte fallback spells every character) and `score` sums a word's pieces.

    Example:

    >>> import sentencepiece as spm, io
    >>> model = io.BytesIO()
    >>> spm.SentencePieceTrainer.train(sentence_iterator=iter(["the cat sat"] * 20), model_writer=model,
    ...     vocab_size=268, byte_fallback=True, minloglevel=2, hard_vocab_limit=False)
    >>> n = spm.SentencePieceProcessor(model_proto=model.getvalue()).get_piece_size()
    >>> tokenizer = SubwordTokenizer(model.getvalue(), list(range(n)))
    >>> tokenizer.decode(tokenizer.encode("the  cat é"))
    'the cat é'
    """

    kind = "subword"
    scores_per_word = True

    def __init__(self, model_proto: bytes, order: Sequence[int]):
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor(model_proto=bytes(model_proto))
        order = np.asarray(order, np.int64)
        self.to_sentencepiece = np.concatenate([np.full(len(RESERVED), -1), order])
        self.to_id = np.empty(len(order), np.int64)
        self.to_id[order] = np.arange(len(RESERVED), len(order) + len(RESERVED))
        self.unk_id = int(self.to_id[self.processor.unk_id()])
        self.never_encoded = (self.unk_id,)
        pieces = [self.processor.id_to_piece(int(i)) for i in order]
        self.starts_word = np.array([False] * len(RESERVED) + [p.startswith(SPACE_MARK) for p in pieces])
        self.byte_values = np.array([-1] * len(RESERVED) + [int(p[3:5], 16) if self.processor.is_byte(int(i)) else -1
                                                            for p, i in zip(pieces, order)])

    def __len__(self) -> int:
        return len(self.to_sentencepiece)

    def tokens_of(self, text: str) -> list[int]:
        text = SUBWORD_SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip(" ")
        return self.to_id[self.processor.encode(text)].tolist() if text else []

    def text_of(self, ids: list[int], whole_characters: bool) -> str:
        if whole_characters:
            ids = ids[:len(ids) - unfinished_character(self.byte_values[ids[-4:]].tolist())]
        return self.processor.decode(self.to_sentencepiece[ids].tolist())

    def word_index(self, ids: Sequence[int]) -> list[int]:
        """A piece that starts with the boundary mark starts a word, the others continue it; -1 for
        `<s>` and `<pad>`, the number of words for `</s>`.

        Returns:
            One index per id.

        Example:

        >>> tokenizer = SubwordTokenizer.__new__(SubwordTokenizer)
        >>> tokenizer.starts_word = np.array([False, False, False, True, False])
        >>> tokenizer.to_sentencepiece = np.arange(5)
        >>> tokenizer.word_index([1, 3, 4, 3, 2])
        [-1, 0, 0, 1, 2]
        """
        out, words = [], 0
        for i in self.check_ids(ids):
            if i in (self.pad_id, self.bos_id):
                out.append(-1)
            elif i == self.eos_id:
                out.append(words)
            else:
                words += bool(self.starts_word[i] or words == 0)
                out.append(words - 1)
        return out


def unfinished_character(last: Sequence[int]) -> int:
    """How many of the last ids (given as the bytes they spell, -1 for one that is not a byte,
    at most 4) begin a UTF-8 character without finishing it; 0 when none do.

    Returns:
        The number of ids to leave out at the end.

    Example:

    >>> unfinished_character([0x61, 0xE2, 0x82]), unfinished_character([0xE2, 0x82, 0xAC])
    (2, 0)
    """
    continuations = 0
    for k, value in enumerate(reversed(last)):
        if value < 0x80:
            return 0
        if value >= 0xC0:
            length = 2 if value < 0xE0 else 3 if value < 0xF0 else 4 if value < 0xF8 else 1
            return k + 1 if continuations + 1 < length else 0
        continuations += 1
    return 0


def load_tokenizer(directory: str | os.PathLike, kind: str | None = None) -> Tokenizer:
    """The tokenizer saved in a LiteRT export's (or a preset's) `directory`: `tokenizer.json` and
    `tokenizer.model` for a subword model, `vocabulary.txt` (with `vocabulary_kind.txt` "char" for
    characters, `vocabulary_line_start.txt` "</s>" for fairseq's line start) otherwise. `kind`,
    where given (`zoo_litert.json`'s `tokenizer`), must agree with the files.

    Returns:
        A `WordTokenizer`, `CharTokenizer` or `SubwordTokenizer`.

    Example:

    >>> import zoo_litert
    >>> load_tokenizer(zoo_litert.EXAMPLE).encode("the cat")
    [1, 4, 6, 2]
    """
    directory = os.fspath(directory)
    if os.path.exists(os.path.join(directory, SUBWORD_CONFIG)):
        found = _subword(directory)
    elif os.path.exists(os.path.join(directory, VOCABULARY_FILE)):
        found = _word_or_char(directory)
    else:
        raise ValueError(f"{directory} holds no tokenizer: neither {SUBWORD_CONFIG} nor {VOCABULARY_FILE}.")
    if kind is not None and found.kind != kind:
        raise ValueError(f"{directory} holds a {found.kind} tokenizer's files, but its zoo_litert.json says {kind!r}.")
    return found


def _read(path, mode="r"):
    try:
        with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"The tokenizer file {path} is not readable ({e}).") from None


def _word_or_char(directory):
    kind_file, start_file = os.path.join(directory, KIND_FILE), os.path.join(directory, LINE_START_FILE)
    cls = CharTokenizer if os.path.exists(kind_file) and _read(kind_file).strip() == "char" else WordTokenizer
    line_start = _read(start_file).strip() if os.path.exists(start_file) else BOS
    if line_start not in (BOS, EOS):
        raise ValueError(f"{start_file} says {line_start!r}; a line start is {BOS} or {EOS}.")
    # as the zoo reads it: text mode's lines (universal newlines), the empty ones skipped
    tokens = _read(os.path.join(directory, VOCABULARY_FILE)).split("\n")
    return cls([token for token in tokens if token], line_start)


def _subword(directory):
    config_path = os.path.join(directory, SUBWORD_CONFIG)
    try:
        config = json.loads(_read(config_path))
        order = config["order"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"The tokenizer file {config_path} is not a zoo subword tokenizer's config "
                         "(a JSON object with its order).") from None
    return SubwordTokenizer(_read(os.path.join(directory, SUBWORD_MODEL), "rb"), order)


__all__ = ["Tokenizer", "WordTokenizer", "CharTokenizer", "SubwordTokenizer", "load_tokenizer", "as_text",
           "unfinished_character"]
