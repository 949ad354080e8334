"""Named corpora: their lines and the tokenizers of their vocabularies."""

from __future__ import annotations

import functools
import os

from zoo.data.corpus import read_lines
from zoo.data.vocab import CharTokenizer, WordTokenizer

BUILT = {"word": WordTokenizer, "char": CharTokenizer}  # the tokenizers built from a corpus' counts


@functools.lru_cache(maxsize=1)
def ptb_tokenizer() -> WordTokenizer:
    """The word tokenizer of the Penn Treebank's own 10k vocabulary (every training word type),
    sorted by frequency.

    Returns it (built once per process).

    >>> tokenizer = ptb_tokenizer()
    >>> len(tokenizer), tokenizer.tokens[4:7], tokenizer.encode("the stock fell")
    (10002, ['the', 'N', 'of'], [1, 4, 62, 204, 2])
    """
    return WordTokenizer.build(read_lines("ptb", "train"))


def build_tokenizer(source: str | os.PathLike, kind: str = "word", min_count: int = 1,
                    max_size: int | None = None) -> WordTokenizer:
    """The word or character tokenizer of a corpus' training split: the treebank's own for "ptb".

    Returns a `WordTokenizer` (`kind="word"`) or `CharTokenizer` (`kind="char"`) of the tokens seen
    `min_count` times or more, at most `max_size` ids.

    >>> len(build_tokenizer("ptb")), len(build_tokenizer("ptb", "char"))
    (10002, 53)
    """
    if kind not in BUILT:
        raise ValueError(f"Unknown tokenizer kind {kind!r}; a corpus' vocabulary is one of {', '.join(BUILT)}.")
    if kind == "word" and source == "ptb" and min_count == 1 and max_size is None:
        return ptb_tokenizer()
    return BUILT[kind].build(read_lines(source, "train"), min_count, max_size)


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    from zoo.deprecation import former_name

    return former_name(__name__, name)
