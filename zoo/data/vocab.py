"""The word and character tokenizers (`WordTokenizer`, `CharTokenizer`): a vocabulary file of
tokens whose ids are sorted by frequency.

The adaptive softmax's cutoffs assume the most frequent words have the smallest ids, so every
vocabulary here is sorted by decreasing training-set frequency after four reserved ids:
`<pad>` (0, only ever padding), `<s>` (1), `</s>` (2) and `<unk>` (3). As §4.1 of Dauphin et
al. says, every line is wrapped in `<s> … </s>`; the model sees both but is only ever asked to
predict `</s>`, never `<s>`.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Sequence

from zoo.data.base_tokenizer import BOS, EOS, PAD, Tokenizer, register_tokenizer
from zoo.data.corpus import check_lines
from zoo.data.graph_tokenizers import CharGraphTokenizer, WordGraphTokenizer
from zoo.deprecation import former_name

UNK = "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
FILENAME = "vocabulary.txt"
KIND_FILENAME = "vocabulary_kind.txt"  # "char" for a `CharTokenizer`; absent for a `WordTokenizer`
LINE_START_FILENAME = "vocabulary_line_start.txt"  # "</s>" for fairseq's convention; absent for "<s>"
LINE_STARTS = (BOS, EOS)


@register_tokenizer
class WordTokenizer(Tokenizer):
    """An ordered list of tokens (the vocabulary); a token's id is its position.

    It is the "word" member of the tokenizer family (`zoo.data.base_tokenizer.Tokenizer`): a
    line's tokens are its whitespace-separated words (Python's `str.split()`), a word the
    vocabulary lacks is `<unk>`.

    `line_start` is the token that opens every line: `<s>` (the paper's §4.1), or `</s>` for a
    model converted from fairseq, whose language models read each line after the previous line's
    `</s>` (`zoo.convert.fairseq`). Then `bos_id == eos_id`, and a stream of lines
    (`zoo.data.pipeline.stream_ids`) holds one `</s>` between lines, as fairseq's does.

    >>> tokenizer = WordTokenizer.build(["the cat sat", "the dog sat"])
    >>> tokenizer.tokens[4:], tokenizer.encode("the bird sat")
    (['sat', 'the', 'cat', 'dog'], [1, 5, 3, 4, 2])
    """

    kind = "word"
    files = (FILENAME, KIND_FILENAME, LINE_START_FILENAME)
    unit = "words"

    def __init__(self, tokens: Iterable[str], line_start: str = BOS):
        tokens = list(tokens)
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"A vocabulary must start with {SPECIALS}, got {tokens[:4]}.")
        if len(set(tokens)) != len(tokens):
            seen = collections.Counter(tokens)
            raise ValueError(f"Repeated tokens in vocabulary: {[t for t, c in seen.items() if c > 1][:5]}.")
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}
        if line_start not in LINE_STARTS:
            raise ValueError(f"line_start must be one of {LINE_STARTS}, got {line_start!r}.")
        self.line_start = line_start
        self.pad_id, self.eos_id, self.unk_id = 0, 2, 3
        self.bos_id = self.index[line_start]  # 1 (<s>), or 2 (</s>)

    @classmethod
    def build(cls, lines: Sequence[str], min_count: int = 1, max_size: int | None = None) -> WordTokenizer:
        """From whitespace-tokenised training lines: words seen `min_count` times or more, the
        `max_size` most frequent (specials included in the size), ties broken alphabetically."""
        check_lines(lines)
        counts = collections.Counter(w for line in lines for w in line.split())
        for special in SPECIALS:
            counts.pop(special, None)
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if max_size is not None:
            if max_size <= len(SPECIALS):
                raise ValueError(f"max_size must be > {len(SPECIALS)} (the reserved tokens), got {max_size}.")
            words = words[: max_size - len(SPECIALS)]
        return cls(list(SPECIALS) + words)

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and self.tokens == other.tokens
                and self.line_start == other.line_start)

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} ids)"

    def build_graph(self) -> WordGraphTokenizer:
        return WordGraphTokenizer(self.tokens, self.pad_id, self.bos_id, self.eos_id, self.unk_id)

    def unknown_share(self, lines: Iterable[str]) -> float:
        """The share of the words of `lines` that this closed vocabulary reads as `<unk>` (words it
        does not hold, and `<unk>` written in the text, as the treebank does)."""
        ids = self.encode_batch(lines, add_bos=False, add_eos=False)
        words = sum(map(len, ids))
        unknown = sum(row.count(self.unk_id) for row in ids)
        return unknown / words if words else 0.0

    def save(self, directory: str | os.PathLike) -> str:
        path = os.path.join(directory, FILENAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.tokens) + "\n")
        if self.line_start != BOS:
            with open(os.path.join(directory, LINE_START_FILENAME), "w", encoding="utf-8") as f:
                f.write(self.line_start + "\n")
        return path

    @classmethod
    def load(cls, directory_or_file: str | os.PathLike) -> WordTokenizer:
        """The word tokenizer saved in a directory (or its `vocabulary.txt`), or the
        `CharTokenizer` when `vocabulary_kind.txt` beside it says "char"."""
        path = directory_or_file
        if os.path.isdir(path):
            path = os.path.join(path, FILENAME)
        directory = os.path.dirname(path)
        kind_file = os.path.join(directory, KIND_FILENAME)
        if cls is WordTokenizer and os.path.exists(kind_file) and open(kind_file).read().strip() == "char":
            return CharTokenizer.load(path)
        line_start, start_file = BOS, os.path.join(directory, LINE_START_FILENAME)
        if os.path.exists(start_file):
            with open(start_file, encoding="utf-8") as f:
                line_start = f.read().strip()
            if line_start not in LINE_STARTS:
                raise ValueError(f"{start_file} says {line_start!r}; a line start is one of {LINE_STARTS}.")
        with open(path, encoding="utf-8") as f:
            return cls((line.rstrip("\n") for line in f if line.rstrip("\n")), line_start=line_start)


class CharTokenizer(WordTokenizer):
    """Characters instead of words: a line's characters (spaces included) are its tokens.

    As a tokenizer ("char"): the tokens are the characters of `line.strip()`, a space as U+2581
    and any other whitespace character dropped; `normalize` is what `decode(encode(text))` gives
    when every character is known (so a U+2581 in the text comes back as a space). `word_index`
    counts the words of that normalised text: the characters of a word share its index, and
    the spaces before a word belong to it (as a subword piece's leading space does).

    >>> tokenizer = CharTokenizer.build(["ab ba"])
    >>> tokenizer.encode("ab"), tokenizer.decode(tokenizer.encode(" ab  a ")), tokenizer.token_texts([6])
    ([1, 4, 5, 2], 'ab  a', [' '])
    """

    kind = "char"
    unit = "characters"
    special_separator = ""

    @classmethod
    def build(cls, lines: Sequence[str], min_count: int = 1, max_size: int | None = None) -> CharTokenizer:
        check_lines(lines)
        return super().build([" ".join(_chars(line)) for line in lines], min_count, max_size)

    def build_graph(self) -> CharGraphTokenizer:
        return CharGraphTokenizer(self.tokens, self.pad_id, self.bos_id, self.eos_id, self.unk_id)

    def unknown_share(self, lines: Iterable[str]) -> None:
        """None: a character model's tokens are not words."""
        return None

    def word_index(self, ids: Iterable[int]) -> list[int]:
        space = self.index.get("\u2581")
        out, words, in_word = [], 0, False
        for position, i in enumerate(self.check_ids(ids).tolist()):
            if i == self.pad_id or self.opens_line(i, position):
                out.append(-1)
            elif i == self.eos_id:
                out.append(words)
            elif i == space:
                out.append(words)  # the next word's
                in_word = False
            else:
                if not in_word:
                    words += 1
                    in_word = True
                out.append(words - 1)
        return out

    def save(self, directory: str | os.PathLike) -> str:
        path = super().save(directory)
        with open(os.path.join(directory, KIND_FILENAME), "w") as f:
            f.write("char\n")
        return path


def _chars(line):
    # U+2581 stands for a space so that characters survive whitespace splitting.
    return ["\u2581" if c == " " else c for c in line.strip()]


def load_word_or_char(directory: str | os.PathLike) -> WordTokenizer:
    """The `WordTokenizer`, or `CharTokenizer` when `vocabulary_kind.txt` says "char", saved in
    `directory` (`zoo.data.tokenizers.load_tokenizer` reads every kind)."""
    return WordTokenizer.load(directory)


# Former names, kept for one release: each warns, naming the new one.
def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
