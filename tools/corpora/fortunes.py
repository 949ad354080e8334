"""The fortune cookie collection of BSD `fortune(6)` (quotations, jokes, aphorisms, short verse),
from Debian's package `fortunes` (apt-get install fortunes), read from its text files in
/usr/share/games/fortunes (or `$ZOO_FORTUNES_DIR`).

A fortune is a document and one line: its lines joined by single spaces, tabs and runs of spaces
collapsed, the attribution ("-- Robert Heinlein") kept. The `ascii-art` file is left out (pictures,
not text); the `.dat` index files and the `.u8` links are skipped.
"""

import os
import re

DESCRIPTION = "fortune cookies: quotations, jokes and short verse (apt-get install fortunes)"
PACKAGE = "fortunes (Debian, from fortune-mod 1.99.1)"
LICENSE = "BSD (the fortune-mod collection, Debian main); quotations name their authors"
KIND = "quotations and jokes"
DEFAULT_DIR = "/usr/share/games/fortunes"
LEFT_OUT = ("ascii-art",)
_SPACE = re.compile(r"\s+")


def fortune_files():
    """The collection's text files, sorted by name."""
    folder = os.environ.get("ZOO_FORTUNES_DIR", DEFAULT_DIR)
    if not os.path.isdir(folder):
        raise ValueError(f"The fortunes are not installed ({folder} is missing): run `apt-get install fortunes` first.")
    names = sorted(n for n in os.listdir(folder) if not n.endswith((".dat", ".u8")) and n not in LEFT_OUT
                   and not n.startswith(".") and os.path.isfile(os.path.join(folder, n)))
    if not names:
        raise ValueError(f"No fortune file in {folder}: run `apt-get install fortunes` first.")
    return [os.path.join(folder, n) for n in names]


def fortunes_of(text):
    """The fortunes of one file's text (separated by lines holding only `%`), each one line."""
    out, lines = [], []
    for line in text.splitlines() + ["%"]:
        if line.strip() == "%":
            joined = _SPACE.sub(" ", " ".join(lines)).strip()
            if joined:
                out.append(joined)
            lines = []
        else:
            lines.append(line)
    return out


def documents():
    """`(file/index, [fortune])` for every fortune of every file."""
    for path in fortune_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for i, fortune in enumerate(fortunes_of(text)):
            yield f"{os.path.basename(path)}/{i}", [fortune]
