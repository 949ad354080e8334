"""The King James Version of the Bible (1611; its copyright has expired), from Debian's packages
`bible-kjv` and `bible-kjv-text` (the text is read through the package's `bible` program):

    apt-get install bible-kjv

A book is a document (66 of them); each verse is a line, without its number.
"""

import re
import shutil
import subprocess

DESCRIPTION = "the King James Bible (apt-get install bible-kjv)"
PACKAGE = "bible-kjv + bible-kjv-text (Debian)"
LICENSE = "public domain (the 1611 translation's copyright has expired); the package's program is GPL-2+"
KIND = "scripture"
_VERSE = re.compile(r"^\s+\d+\s+(.*\S)\s*$")  # indented: "1 Samuel 1" is a heading
_CHAPTER = re.compile(r"^(\S.*?)\s+(\d+)$")


def bible_text():
    """Every verse, as the `bible` program prints them (chapter headings, numbered verses)."""
    program = shutil.which("bible")
    if program is None:
        raise ValueError("The King James Bible is not installed: run `apt-get install bible-kjv` first.")
    try:
        done = subprocess.run([program, "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                              timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueError(f"The `bible` program ({program}) could not print the text: {e}.") from None
    return done.stdout


def documents():
    """`(book, verses)` of the 66 books, in their order."""
    book, verses = None, []
    for line in bible_text().splitlines():
        chapter, verse = _CHAPTER.match(line), _VERSE.match(line)
        if chapter and not verse:
            if chapter.group(1) != book:
                if verses:
                    yield book, verses
                book, verses = chapter.group(1), []
        elif verse and book is not None:
            verses.append(verse.group(1))
    if verses:
        yield book, verses
