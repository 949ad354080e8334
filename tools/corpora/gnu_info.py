"""Ten GNU manuals in Info format, of the shell and the core command-line tools (coreutils, sed,
grep, findutils, diffutils, gzip, bash, time, ed, wget), from the Debian packages that install
them into /usr/share/info (or `$ZOO_INFO_DIR`):

    apt-get install coreutils sed grep findutils diffutils gzip bash-doc time ed wget

Every one of them is under the GNU Free Documentation License 1.3 or later with no Invariant
Sections and no Cover Texts (each manual's header says so), and all are in Debian main.

An Info node (a section of a manual: "sed/Overview") is a document. Info is already plain text,
filled at 72 columns; it is read back into lines: each paragraph of prose becomes a line (its
wrapped lines joined), headings (without their underlines and numbers) and the labels of tables
and definitions (‘-a’, ‘--all’, "Command: cd [DIRECTORY]") are lines of their own, and examples
(indented deeper than the prose around them) are kept, a line each, since code and symbols are
part of technical text. Node headers, menus, footnote rules and image and index markers are
dropped, and so are _emphasis_ and *strong* marks; cross references read as in print ("*Note
Overview::" becomes "See Overview", "(*note Overview::)" "(see Overview)", another "*note
Overview::" "Overview"). The nodes of the licence, the copying conditions and the indexes are left
out. Runs of white space become one space; the manuals' curly quotes stay as they are. Telling an
example from prose goes by indentation and is a heuristic: a few displays come out joined, a
few indented paragraphs a line per line.
"""

import os
import re

from zoo.tools.corpora.splits import read_text

DESCRIPTION = ("ten GNU manuals in Info format: coreutils, sed, grep, find, diff, gzip, bash, time, ed, wget "
               "(apt-get install coreutils sed grep findutils diffutils gzip bash-doc time ed wget)")
PACKAGE = ("coreutils 9.1-1, sed 4.9-1, grep 3.8-5, findutils 4.9.0-4, diffutils 1:3.8-4, gzip 1.12-1, "
           "bash-doc 5.2.15-2, time 1.9-0.2, ed 1.19-1, wget 1.21.3-1+deb12u1 (Debian)")
LICENSE = "GNU FDL 1.3 or later, no Invariant Sections, no Cover Texts (every manual), Debian main"
KIND = "technical documentation: manuals"
INFO_DIR = "/usr/share/info"
# manual (its file name in /usr/share/info) -> the Debian package that installs it
MANUALS = {"coreutils": "coreutils", "sed": "sed", "grep": "grep", "find": "findutils", "diffutils": "diffutils",
           "gzip": "gzip", "bash": "bash-doc", "time": "time", "ed": "ed", "wget": "wget"}
LEFT_OUT = re.compile(r"^(GNU Free Documentation License|Copying( this manual)?|.*\bindex(es)?)$", re.IGNORECASE)
_HEADER = re.compile(r"^File: [^,]*,\s+Node: ([^,\t]*)")
_UNDERLINE = re.compile(r"^([*=\-.])\1*$")
_MARKER = re.compile(r"\x00\x08\[[^\x00]*\x00\x08\]")
_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)+|Appendix [A-Z])\.?\s+")
_BULLET = re.compile(r"^(?:[•*-]|\d+\.|[A-Za-z]\.)\s+")
_NOTE = re.compile(r"(\b[Ss]ee\s+)?\*([Nn])ote\s+(.+?)(?:::|:\s*(?:\([^)\s]*\))?[^.,:;()]*?(?=[.,]))(?:\.(?=\)))?",
                   re.DOTALL)  # "*note Label: (manual)Node." (the "." ends the reference before a ")")
_EMPHASIS = re.compile(r"(?<![\w‘'*])([_*])([^\W_][^\W_]*(?:[ -][^\W_]+)*)\1(?![\w’'*])")  # _emph_, *strong*
_SPACE = re.compile(r"\s+")


def manual_files():
    """`{manual: [its files]}`: the main file and its parts (find.info-1.gz, ...), in order."""
    folder = os.environ.get("ZOO_INFO_DIR", INFO_DIR)
    files, missing = {}, []
    for manual, package in MANUALS.items():
        parts = [name for name in (os.listdir(folder) if os.path.isdir(folder) else [])
                 if re.fullmatch(re.escape(manual) + r"\.info(-\d+)?(\.gz)?", name)]
        if not parts:
            missing.append(package)
            continue
        parts.sort(key=lambda n: int(re.search(r"-(\d+)", n).group(1)) if re.search(r"info-\d", n) else 0)
        files[manual] = [os.path.join(folder, name) for name in parts]
    if missing:
        raise ValueError(f"Some GNU manuals are not in {folder} (of {', '.join(missing)}): run "
                         f"`apt-get install {' '.join(MANUALS.values())}` first.")
    return files


def nodes(text):
    """`(node name, its text lines)` of every node of an Info file's text (headers, tag tables
    and indirect tables left out)."""
    for chunk in text.split("\x1f"):
        lines = chunk.lstrip("\n").split("\n")
        match = _HEADER.match(lines[0])
        if match:
            yield match.group(1).strip(), lines[1:]


def inline_text(text):
    text = _EMPHASIS.sub(r"\2", text)
    def reference(m):  # "*Note" is @xref ("See"), "(*note" @pxref ("see"), other "*note" @ref (nothing)
        see = m.group(1) or ("See " if m.group(2) == "N" else "see " if text[m.start() - 1:m.start()] == "(" else "")
        return see + re.sub(r"^\([^)\s]*\)", "", m.group(3))

    text = _NOTE.sub(reference, text)
    return _SPACE.sub(" ", text).strip()


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _filled(block):
    """A block that reads like a paragraph filled at 72 columns (a quotation), not an example."""
    texts = [line.strip() for line in block]
    if len(texts) < 2 or len({_indent(line) for line in block[1:]}) > 1:
        return False
    words = " ".join(texts).split()
    return (min(map(len, texts[:-1])) >= 30 and sum(map(len, texts[:-1])) >= 45 * (len(texts) - 1)
            and texts[-1][-1:] in ".:;?!)”\""
            and sum(w.strip(",.;:()‘’“”").isalpha() for w in words) >= 0.7 * len(words))


def _prose_like(lines):
    """Lines of prose, not of an example: a filled paragraph or one sentence of four words or more."""
    if len(lines) != 1:
        return _filled(lines)
    words = lines[0].split()
    return (lines[0].rstrip().endswith((".", ":", "!", "?")) and len(words) >= 4
            and sum(w.strip(",.;:()‘’“”'\"").isalpha() for w in words) >= 0.7 * len(words))


def _item(block, depth, i):
    """Whether line `i` starts an item of a list, its text going on under its text."""
    bullet = _BULLET.match(block[i].strip())
    return bool(bullet) and i + 1 < len(block) and 0 <= depth[i] + bullet.end() - depth[i + 1] <= 1  # "10." too


def _label_like(line):
    text = line.strip()
    return text.startswith("-- ") or (len(text) <= 60 and not text.endswith((".", ":", ";", ",", "!", "?")))


def block_lines(block, context):
    """The lines of one block of text (lines between blank lines) and the indent of its prose,
    `context`: the indent of the prose before it."""
    out = []
    n, depth = len(block), [_indent(line) for line in block]

    def emit(lines):
        text = inline_text(" ".join(line.strip() for line in lines))
        if text:
            out.append(text)

    def example(line):
        out.append(_SPACE.sub(" ", line).strip())

    if (min(depth) > context + 3 and not block[0].lstrip().startswith("-- ") and not _prose_like(block)
            and not _item(block, depth, 0)
            and not (n > 1 and depth[1] > depth[0] and _label_like(block[0])
                     and _prose_like(block[1:next((j for j in range(1, n) if depth[j] <= depth[0]), n)]))):
        for line in block:
            example(line)
        return out, context
    i = 0
    while i < n:
        d, run_end = depth[i], i + 1
        bullet = _BULLET.match(block[i].strip())
        while run_end < n and depth[run_end] == d and not (
                _item(block, depth, run_end) or (bullet and _BULLET.match(block[run_end].strip()))):
            run_end += 1
        after = depth[run_end] if run_end < n else None
        if after is not None and after > d and not (run_end == i + 1 and _item(block, depth, i)):
            # lines before deeper ones: labels (a table's item, a definition) or a paragraph and an example
            labels = 0
            while labels < run_end - i and _label_like(block[run_end - 1 - labels]):
                labels += 1
            prose = block[i:run_end - labels]
            if prose and not prose[-1].rstrip().endswith((".", ":", ";", "!", "?", ")")):
                prose, labels = block[i:run_end], 0
            if not labels and run_end == i + 1:  # a label that ends in a full stop, above its text
                deeper = block[run_end:next((j for j in range(run_end, n) if depth[j] <= d), n)]
                if _prose_like(deeper):
                    prose, labels = [], 1
            if prose:
                emit(prose)
                context = d
            for label in block[run_end - labels:run_end]:
                emit([label.strip().removeprefix("-- ")])
            i = run_end
            base = context if d == context + 3 else d  # a paragraph's first line is indented by 3
            if not labels:  # lines indented deeper than a paragraph: an example
                while i < n and depth[i] > base + 3 and not _item(block, depth, i):
                    example(block[i])
                    i += 1
            continue
        # a paragraph: its first line, then the lines of its continuation indent
        if run_end > i + 1 or run_end == n:
            paragraph, indent, i = block[i:run_end], d, run_end
        elif depth[i + 1] == d - 3 or _item(block, depth, i):
            # a paragraph's first line is indented by 3; a list item's text goes on under its text
            paragraph, indent, i = [block[i]], depth[i + 1], i + 1
            while i < n and depth[i] == indent and not _item(block, depth, i) and not (
                    i + 1 < n and depth[i + 1] > indent and _label_like(block[i])  # a label above its text
                    and paragraph[-1].rstrip().endswith((".", ":", ";", "!", "?"))):
                paragraph.append(block[i])
                i += 1
        else:
            paragraph, indent, i = [block[i]], d, i + 1
        emit(paragraph)
        if not (len(paragraph) == 1 and d == context + 3):  # not a one-line paragraph indented by 3
            context = min(d, indent)
        while i < n and depth[i] > indent + 3 and not _item(block, depth, i):  # an example
            example(block[i])
            i += 1
    return out, context


def prose_lines(body):
    """The lines of one node's text (see the module's docstring)."""
    lines = []
    for line in body:
        if line.startswith("* Menu:"):
            break  # a menu ends its node
        line = _MARKER.sub("", line).replace("\t", "        ")
        if line.strip() == "---------- Footnotes ----------":
            continue
        lines.append(line.rstrip())
    out, context, block = [], 0, []
    for line in lines + [""]:
        if line.strip():
            block.append(line)
            continue
        if not block:
            continue
        if len(block) == 2 and _UNDERLINE.match(block[1].strip()) and len(block[1].strip()) >= len(block[0].strip()) - 1:
            out.append(_NUMBER.sub("", block[0].strip()))  # a heading, without its number
            context = 0
        else:
            more, context = block_lines(block, context)
            out += more
        block = []
    return out


def documents():
    """`(manual/node, lines)` of every node of the manuals, manual by manual in their order."""
    for manual, paths in manual_files().items():
        text = "".join(read_text(path) for path in paths)
        for node, body in nodes(text):
            if LEFT_OUT.match(node):
                continue
            lines = prose_lines(body)
            if lines:
                yield f"{manual}/{node}", lines
