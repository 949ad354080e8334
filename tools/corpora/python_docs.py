"""The Python documentation (tutorial, library and language reference, HOWTOs, FAQ, what's new),
from its reStructuredText sources in Debian's package `python3.11-doc` (PSF licence):

    apt-get install python3.11-doc      # any python3.X-doc: the newest installed one is read

A page is a document; each paragraph of prose becomes a line. Code (blocks after `::`, doctest
`>>>` lines, directives' code), tables, comments and heading underlines are removed; roles and
inline markup keep their text (":func:`len`" reads "len").
"""

import glob
import os
import re

DESCRIPTION = "the Python documentation (apt-get install python3.11-doc)"
PACKAGE = "python3.11-doc (Debian)"
LICENSE = "PSF License (Python Software Foundation)"
KIND = "technical documentation"
SOURCES_GLOB = "/usr/share/doc/python3.*/html/_sources"

_ROLE = re.compile(r":[\w:.-]+:`~?([^`<]*?)\s*(?:<[^`>]*>)?`")
_REFERENCE = re.compile(r"`([^`<]*?)\s*(?:<[^`>]*>)?`__?")
_LITERAL = re.compile(r"``(.+?)``")
_EMPHASIS = re.compile(r"\*\*?([^*\s][^*]*?)\*\*?")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")
_CODE_DIRECTIVES = ("code-block", "sourcecode", "testcode", "testoutput", "doctest", "productionlist",
                    "literalinclude", "highlight", "toctree", "raw", "csv-table", "list-table", "table",
                    "image", "figure", "index", "include", "only", "grammar-snippet", "c:")


def sources_folder():
    """The newest installed python3.X-doc's reStructuredText sources."""
    found = sorted(glob.glob(SOURCES_GLOB), key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
    if not found:
        raise ValueError(f"The Python documentation is not installed: run `apt-get install python3.11-doc` "
                         f"(or any python3.X-doc) first; looked for {SOURCES_GLOB}.")
    return found[-1]


def inline_text(text):
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _REFERENCE.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    return re.sub(r"\s+", " ", text.replace("\\", "")).strip()


def prose_lines(rst):
    """The paragraphs of prose of one page, each as one line."""
    lines = rst.splitlines()
    paragraphs, block, skip_deeper = [], [], None

    def indent(line):
        return len(line) - len(line.lstrip())

    def flush():
        nonlocal skip_deeper
        if not block:
            return
        first = block[0]
        depth = indent(first)
        if skip_deeper is not None and depth > skip_deeper:
            block.clear()
            return  # code (or a directive's body) under the previous paragraph
        skip_deeper = None
        stripped = first.strip()
        if stripped.startswith(".. "):
            name = stripped[3:].split("::")[0].strip()
            skip_deeper = depth if (name.startswith(_CODE_DIRECTIVES) or "::" not in stripped
                                    or name.startswith("_")) else None
            block.clear()
            return
        text = [line.strip() for line in block if not _UNDERLINE.match(line.strip())]
        if (not text or text[0].startswith((">>>", "+-", "|", "$ ", "% ", "#"))
                or all(re.fullmatch(r"[=\s]+", t) for t in block if t.strip())):
            block.clear()
            return
        paragraph = " ".join(text)
        if paragraph.endswith("::"):
            skip_deeper = depth
            paragraph = paragraph[:-1] if not paragraph.endswith(" ::") else paragraph[:-3]
        paragraph = inline_text(paragraph)
        heading = len(text) == 1 and len(block) > 1  # a title with its underline (and overline)
        if len(paragraph.split()) >= 3 or heading:
            paragraphs.append(paragraph)
        block.clear()

    for line in lines:
        if line.strip():
            block.append(line.rstrip())
        else:
            flush()
    flush()
    return paragraphs


def documents():
    """`(page, lines)` of every page of the documentation, sorted by its path."""
    folder = sources_folder()
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.rst.txt"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = prose_lines(f.read())
        if lines:
            yield os.path.relpath(path, folder)[:-len(".rst.txt")], lines
