"""Named corpora: their lines and the tokenizers of their vocabularies."""

import functools

from zoo.data.corpus import read_lines
from zoo.data.vocab import CharTokenizer, WordTokenizer


@functools.lru_cache(maxsize=1)
def ptb_tokenizer():
    """The word tokenizer of the Penn Treebank's own 10k vocabulary (every training word type),
    sorted by frequency."""
    return WordTokenizer.build(read_lines("ptb", "train"))


def build_tokenizer(source, kind="word", min_count=1, max_size=None):
    """The word or character tokenizer of a corpus' training split: the treebank's own for "ptb"."""
    if kind == "char":
        return CharTokenizer.build(read_lines(source, "train"), min_count, max_size)
    if source == "ptb" and min_count == 1 and max_size is None:
        return ptb_tokenizer()
    return WordTokenizer.build(read_lines(source, "train"), min_count, max_size)


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    from zoo.deprecation import former_name

    return former_name(__name__, name)
