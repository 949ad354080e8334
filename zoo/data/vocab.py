"""The word and character tokenizers (`WordTokenizer`, `CharTokenizer`): a vocabulary file of
tokens whose ids are sorted by frequency.

The adaptive softmax's cutoffs assume the most frequent words have the smallest ids, so every
vocabulary here is sorted by decreasing training-set frequency after four reserved ids:
`<pad>` (0, only ever padding), `<s>` (1), `</s>` (2) and `<unk>` (3). As §4.1 of Dauphin et
al. says, every line is wrapped in `<s> … </s>`; the model sees both but is only ever asked to
predict `</s>`, never `<s>`.
"""

import collections
import os

import numpy as np

from zoo.data.corpus import check_lines
from zoo.data.graph_tokenizers import GraphTokenizer, Tokenizer
from zoo.deprecation import former_name

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
FILENAME = "vocabulary.txt"
KIND_FILENAME = "vocabulary_kind.txt"  # "char" for a `CharTokenizer`; absent for a `WordTokenizer`
LINE_START_FILENAME = "vocabulary_line_start.txt"  # "</s>" for fairseq's convention; absent for "<s>"
LINE_STARTS = (BOS, EOS)


class WordTokenizer:
    """An ordered list of tokens (the vocabulary); a token's id is its position.

    It is the "word" member of the tokenizer family of `zoo.data.tokenizers` (`kind`,
    `normalize`, `encode`, `encode_batch`, `decode`, `token_texts`, `word_index`, `save`,
    `graph_tokenizer`); text may be given as `bytes`, decoded as UTF-8 with errors="replace".

    `line_start` is the token that opens every line: `<s>` (the paper's §4.1), or `</s>` for a
    model converted from fairseq, whose language models read each line after the previous line's
    `</s>` (`zoo.convert.fairseq`). Then `bos_id == eos_id`, and a stream of lines
    (`zoo.data.pipeline.stream_ids`) holds one `</s>` between lines, as fairseq's does.
    """

    kind = "word"

    def __init__(self, tokens, line_start=BOS):
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
    def build(cls, lines, min_count=1, max_size=None):
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

    def __len__(self):
        return len(self.tokens)

    def __eq__(self, other):
        return (isinstance(other, WordTokenizer) and self.tokens == other.tokens
                and self.line_start == other.line_start)

    def normalize(self, text):
        """The text `decode(encode(text))` gives back when every word is in the vocabulary:
        the whitespace-separated words (Python's `str.split()`) joined by one space."""
        return " ".join(_text(text).split())

    def encode(self, line, add_bos=True, add_eos=True):
        ids = [self.index.get(w, self.unk_id) for w in _text(line).split()]
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def encode_batch(self, lines, add_bos=True, add_eos=True):
        """`[encode(line, add_bos, add_eos) for line in lines]`."""
        return [self.encode(line, add_bos, add_eos) for line in lines]

    def decode(self, ids, strip_specials=True, whole_characters=False):
        """The text of `ids` (`whole_characters` is the subword tokenizer's: words and characters
        are always whole)."""
        words = [self.tokens[int(i)] for i in ids]
        if strip_specials:
            words = [w for w in words if w not in (PAD, BOS, EOS)]
        return " ".join(words)

    def token_texts(self, ids):
        """The token of each id, reserved ones as their names ("<s>", "<unk>" …)."""
        return [self.tokens[int(i)] for i in ids]

    def word_index(self, ids):
        """For the ids of one encoded line: the index of the whitespace-separated word each id
        belongs to; -1 for `<s>` (and `<pad>`), one past the last word for `</s>`. Every other
        token (`<unk>` included) is a word of its own: 0, 1, 2 …"""
        out, words = [], 0
        for position, i in enumerate(ids):
            i = int(i)
            if i == self.pad_id or self._opens(i, position):
                out.append(-1)
            elif i == self.eos_id:
                out.append(words)
            else:
                out.append(words)
                words += 1
        return out

    def _opens(self, i, position):
        """Whether id `i` at `position` of an encoded line is its line start (a `</s>` line
        start opens a line only as its first id)."""
        return i == self.bos_id and (self.bos_id != self.eos_id or position == 0)

    def graph_tokenizer(self, asset_dir):
        """The in-graph tokenizer (`zoo.data.graph_tokenizers.GraphTokenizer`) for a SavedModel:
        the vocabulary file is written into `asset_dir` (which must outlive the export) and read
        by its lookup tables."""
        return GraphTokenizer(Tokenizer(self, self.save(asset_dir)))

    def save(self, directory):
        path = os.path.join(directory, FILENAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.tokens) + "\n")
        if self.line_start != BOS:
            with open(os.path.join(directory, LINE_START_FILENAME), "w", encoding="utf-8") as f:
                f.write(self.line_start + "\n")
        return path

    @classmethod
    def load(cls, directory_or_file):
        path = directory_or_file
        if os.path.isdir(path):
            path = os.path.join(path, FILENAME)
        line_start, start_file = BOS, os.path.join(os.path.dirname(path), LINE_START_FILENAME)
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
    """

    kind = "char"

    @classmethod
    def build(cls, lines, min_count=1, max_size=None):
        check_lines(lines)
        return super().build([" ".join(_chars(line)) for line in lines], min_count, max_size)

    def normalize(self, text):
        return "".join(c for c in _chars(_text(text)) if not c.isspace()).replace("\u2581", " ")

    def encode(self, line, add_bos=True, add_eos=True):
        return super().encode(" ".join(_chars(_text(line))), add_bos, add_eos)

    def decode(self, ids, strip_specials=True, whole_characters=False):
        return "".join(super().decode(ids, strip_specials).split(" ")).replace("\u2581", " ")

    def token_texts(self, ids):
        """The character of each id (a space for U+2581), reserved ones as their names."""
        return [t.replace("\u2581", " ") for t in super().token_texts(ids)]

    def word_index(self, ids):
        space = self.index.get("\u2581")
        out, words, in_word = [], 0, False
        for position, i in enumerate(ids):
            i = int(i)
            if i == self.pad_id or self._opens(i, position):
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

    def save(self, directory):
        path = super().save(directory)
        with open(os.path.join(directory, KIND_FILENAME), "w") as f:
            f.write("char\n")
        return path


def _text(text):
    """`text`, or `bytes` decoded as UTF-8 with each invalid sequence replaced by U+FFFD."""
    if isinstance(text, (bytes, bytearray, np.bytes_)):
        return bytes(text).decode("utf-8", errors="replace")
    return text


def _chars(line):
    # U+2581 stands for a space so that characters survive whitespace splitting.
    return ["\u2581" if c == " " else c for c in line.strip()]


def load_word_or_char(directory):
    """The `WordTokenizer`, or `CharTokenizer` when `vocabulary_kind.txt` says "char", saved in
    `directory` (`zoo.data.tokenizers.load_tokenizer` reads every kind)."""
    kind_file = os.path.join(directory, KIND_FILENAME)
    if os.path.exists(kind_file) and open(kind_file).read().strip() == "char":
        return CharTokenizer.load(directory)
    return WordTokenizer.load(directory)


# Former names, kept for one release: each warns, naming the new one.
def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
