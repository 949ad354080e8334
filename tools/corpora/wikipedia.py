"""English Wikipedia articles, from the test data of the PyPI package `gensim`: the first pages
of a 2016 English Wikipedia dump (`enwiki-latest-pages-articles1.xml-...-shortened.bz2`),
licensed CC BY-SA 3.0 (Wikipedia's text licence):

    pip install --no-deps gensim==4.4.0     # only its test data is read; nothing is imported

An article is a document; its wiki markup (templates, references, tables, file and category
links, bold and italics) is removed, links keep their text, and each paragraph is a line.
Redirect pages and pages outside the article namespace are skipped.
"""

import bz2
import html
import importlib.util
import os
import re
import xml.etree.ElementTree as ET

DESCRIPTION = "English Wikipedia articles (pip install --no-deps gensim==4.4.0; its test data)"
PACKAGE = "gensim==4.4.0"
LICENSE = "CC BY-SA 3.0 (Wikipedia text); the package is LGPL-2.1"
KIND = "encyclopaedic"
DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|[^{}]*?\|\}", re.S)
_FILE_LINK = re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*(?:\[\[[^\[\]]*\]\][^\[\]]*)*\]\]", re.I)
_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]")
_EXTERNAL = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\s*([^\]]*)\]")
_HEADING = re.compile(r"^=+\s*(.*?)\s*=+$")
_SPACES = re.compile(r"[ \t]+")


def dump_path():
    """The dump inside the installed `gensim` package (found without importing it)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"The Wikipedia articles are not installed: run `pip install --no-deps {PACKAGE}` first.")
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", DUMP)
    if not os.path.isfile(path):
        raise ValueError(f"The installed gensim has no {DUMP}: run `pip install --no-deps {PACKAGE}`.")
    return path


def plain_text(markup):
    """The paragraphs of one article's wiki markup as plain lines."""
    text = _COMMENT.sub("", markup)
    text = _REF.sub("", text)
    for pattern in (_TEMPLATE, _TABLE):  # nested: strip innermost first until none is left
        while True:
            stripped = pattern.sub("", text)
            if stripped == text:
                break
            text = stripped
    text = _FILE_LINK.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _EXTERNAL.sub(r"\1", text)
    text = _TAG.sub("", html.unescape(_TAG.sub("", text)))
    text = text.replace("'''", "").replace("''", "")
    lines = []
    for line in text.split("\n"):
        line = _SPACES.sub(" ", line).strip()
        heading = _HEADING.match(line)
        if heading:
            line = heading.group(1)
        if not line or line[0] in "*#:;|!{}[" or line.startswith("__"):
            continue  # lists, tables, leftovers of markup: not prose
        if len(line.split()) < 3 and not heading:
            continue
        lines.append(line)
    return lines


def documents():
    """`(title, lines)` of every article of the dump, in the dump's order."""
    ns = "{http://www.mediawiki.org/xml/export-0.10/}"
    with bz2.open(dump_path(), "rb") as f:
        for _, element in ET.iterparse(f):
            if element.tag != ns + "page":
                continue
            title = element.findtext(ns + "title")
            text = element.findtext(f"{ns}revision/{ns}text") or ""
            if element.findtext(ns + "ns") == "0" and element.find(ns + "redirect") is None:
                lines = plain_text(text)
                if lines:
                    yield title, lines
            element.clear()
