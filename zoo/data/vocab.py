"""Word-level vocabularies with ids sorted by frequency.

The adaptive softmax's cutoffs assume the most frequent words have the smallest ids, so every
vocabulary here is sorted by decreasing training-set frequency after four reserved ids:
`<pad>` (0, only ever padding), `<s>` (1), `</s>` (2) and `<unk>` (3). As §4.1 of Dauphin et
al. says, every line is wrapped in `<s> … </s>`; the model sees both but is only ever asked to
predict `</s>`, never `<s>`.
"""

import collections
import os

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
FILENAME = "vocabulary.txt"


class Vocabulary:
    """An ordered list of tokens; a token's id is its position."""

    def __init__(self, tokens):
        tokens = list(tokens)
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"A vocabulary must start with {SPECIALS}, got {tokens[:4]}.")
        if len(set(tokens)) != len(tokens):
            seen = collections.Counter(tokens)
            raise ValueError(f"Repeated tokens in vocabulary: {[t for t, c in seen.items() if c > 1][:5]}.")
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)

    @classmethod
    def build(cls, lines, min_count=1, max_size=None):
        """From whitespace-tokenised training lines: words seen `min_count` times or more, the
        `max_size` most frequent (specials included in the size), ties broken alphabetically."""
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
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def encode(self, line, add_bos=True, add_eos=True):
        ids = [self.index.get(w, self.unk_id) for w in line.split()]
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids, strip_specials=True):
        words = [self.tokens[int(i)] for i in ids]
        if strip_specials:
            words = [w for w in words if w not in (PAD, BOS, EOS)]
        return " ".join(words)

    def save(self, directory):
        path = os.path.join(directory, FILENAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.tokens) + "\n")
        return path

    @classmethod
    def load(cls, directory_or_file):
        path = directory_or_file
        if os.path.isdir(path):
            path = os.path.join(path, FILENAME)
        with open(path, encoding="utf-8") as f:
            return cls(line.rstrip("\n") for line in f if line.rstrip("\n"))


class CharacterVocabulary(Vocabulary):
    """Characters instead of words: a line's characters (spaces included) are its tokens."""

    @classmethod
    def build(cls, lines, min_count=1, max_size=None):
        return super().build([" ".join(_chars(line)) for line in lines], min_count, max_size)

    def encode(self, line, add_bos=True, add_eos=True):
        return super().encode(" ".join(_chars(line)), add_bos, add_eos)

    def decode(self, ids, strip_specials=True):
        return "".join(super().decode(ids, strip_specials).split(" ")).replace("\u2581", " ")

    def save(self, directory):
        path = super().save(directory)
        with open(os.path.join(directory, "vocabulary_kind.txt"), "w") as f:
            f.write("char\n")
        return path


def _chars(line):
    # U+2581 stands for a space so that characters survive whitespace splitting.
    return ["\u2581" if c == " " else c for c in line.strip()]


def load_vocabulary(directory):
    kind_file = os.path.join(directory, "vocabulary_kind.txt")
    if os.path.exists(kind_file) and open(kind_file).read().strip() == "char":
        return CharacterVocabulary.load(directory)
    return Vocabulary.load(directory)
