"""The Linux man pages (system calls, the C library, devices, file formats, overviews), from
Debian's packages `manpages` and `manpages-dev` (the man-pages project), read as the roff sources
that the packages install into /usr/share/man/man1 to man8 (or `$ZOO_MANPAGES_DIR`, a folder
holding man1/ to man8/):

    apt-get install manpages manpages-dev

A man page is a document (alias pages, symbolic links or `.so` includes, are left out, so each
text is read once, and so are the code charts of 8-bit character sets, iso_8859-1(7) and the like:
tables of characters, most of them not English). The roff is turned into lines as `man` would show them, less the layout:
each filled paragraph becomes a line; headings (NAME, SYNOPSIS, a `.SS` title) and the tags of
`.TP` lists (an option, an error name) are lines of their own; lines in no-fill mode (the
synopsis, code examples between `.nf`/`.EX` and `.fi`/`.EE`) and each row of a `tbl` table
(cells joined by a space) are kept, one line each, since code and symbols are part of technical
text. Requests, macros and comments are dropped, font escapes (\\fB, \\fI, \\fR, \\fP) removed, and
special characters written as what they print (\\- "-", \\(em "—", \\(aq "'", \\e "\\"); bullets
are dropped, list numbers kept. Runs of white space become one space.

Only the two packages' pages are read: their file lists in /var/lib/dpkg/info name them (the
other pages in /usr/share/man belong to other packages and licences).
"""

import os
import re
import unicodedata

from zoo.tools.corpora.splits import read_text

DESCRIPTION = "the Linux man pages: system calls, C library, files, overviews (apt-get install manpages manpages-dev)"
PACKAGE = "manpages + manpages-dev 6.03-2 (Debian; the man-pages project 6.03)"
LICENSE = ("various free licences, page by page (mostly the Linux-man-pages-copyleft licence, also GPL-2+, "
           "BSD and MIT; see /usr/share/doc/manpages/copyright), Debian main")
KIND = "technical documentation: manual pages"
MAN_DIR = "/usr/share/man"
LISTS = ("/var/lib/dpkg/info/manpages.list", "/var/lib/dpkg/info/manpages-dev.list")
INSTALL = "apt-get install manpages manpages-dev"
_SECTION_DIR = re.compile(r"^man[1-8]$")
# the code charts of 8-bit character sets: tables of characters, most of them not English
LEFT_OUT = re.compile(r"^(iso_8859-\d+|koi8-[ru]|cp125\d|armscii-8)\.7(\.gz)?$")

# special characters, \(xx or \[xx], as text
CHARACTERS = {
    "aq": "'", "dq": '"', "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "ga": "`", "ha": "^",
    "ti": "~", "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "\u2212", "bu": "\u2022", "+-": "\u00b1",
    "de": "\u00b0", "dg": "\u2020", "sc": "\u00a7", "mc": "\u00b5", "12": "\u00bd", "14": "\u00bc",
    "34": "\u00be", "fm": "\u2032", "sd": "\u2033", "la": "\u27e8", "ra": "\u27e9", "co": "\u00a9",
    "rg": "\u00ae", "tm": "\u2122", "rs": "\\", "sl": "/", "lB": "[", "rB": "]", "lC": "{", "rC": "}",
    "at": "@", "sh": "#", "Do": "$", "eu": "\u20ac", "Po": "\u00a3", "ct": "\u00a2", "ss": "\u00df",
    "<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "==": "\u2261", "->": "\u2192", "<-": "\u2190",
    "mu": "\u00d7", "di": "\u00f7", "pl": "+", "eq": "=", "bv": "|", "or": "|", "ul": "_", "ru": "_",
    "pc": "\u00b7", "**": "*", "Fo": "\u00ab", "Fc": "\u00bb", "fo": "\u2039", "fc": "\u203a",
    "ua": "\u2191", "da": "\u2193", "Tm": "\u2122", "ne": "\u2262", "if": "\u221e", "no": "\u00ac",
}
_ACCENTS = {":": "\u0308", "^": "\u0302", "`": "\u0300", "'": "\u0301", "~": "\u0303", ",": "\u0327",
            "o": "\u030a", "v": "\u030c"}
STRINGS = {"lq": "\u201c", "rq": "\u201d", "-": "-", "<": "<", ">": ">", "dg": "\u2020", "Tm": "\u2122",
           "R": "\u00ae", "Aq": "'"}
_ESCAPE = re.compile(r"""\\(?:
    \((?P<paren>..) | \[(?P<bracket>[^\]]*)\] |
    \*(?:\((?P<sparen>..)|\[(?P<sbracket>[^\]]*)\]|(?P<sone>.)) |
    [fFn](?:\(..|\[[^\]]*\]|.) | s(?:[-+]?\d|\(\d\d|[-+]\(\d\d|\[[^\]]*\]) |
    N'(?P<number>\d+)' | [hvwlLxXbozZRDkHS]'[^']*' | (?P<other>.))""", re.VERBOSE)
_SIMPLE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": " ", "`": "`", "'": "'",
           ".": ".", "E": "\\"}


def character(name):
    if name in CHARACTERS:
        return CHARACTERS[name]
    if len(name) == 2 and name[0] in _ACCENTS and name[1].isalpha():  # \(:a, \['e]
        return unicodedata.normalize("NFC", name[1] + _ACCENTS[name[0]])
    if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}", name):
        return chr(int(name[1:], 16))
    return ""


def _escape(match):
    groups = match.groupdict()
    if groups["paren"] is not None or groups["bracket"] is not None:
        return character(groups["paren"] or groups["bracket"])
    name = groups["sparen"] or groups["sbracket"] or groups["sone"]
    if name is not None:
        return STRINGS.get(name, "")
    if groups["number"]:
        return chr(int(groups["number"]))
    return _SIMPLE.get(groups["other"] or "", "")  # fonts, sizes, motions, \& \| \^ \% \: \c: nothing


def text_of(roff):
    """A line of roff text as plain text: comments cut, escapes written as what they print."""
    return _ESCAPE.sub(_escape, _cut_comment(roff))


def _cut_comment(line):
    i = 0
    while True:
        i = line.find("\\", i)
        if i < 0 or i + 1 >= len(line):
            return line
        if line[i + 1] == '"':
            return line[:i]
        i += 2


def joined_lines(roff):
    """The input lines, a line that ends in an escaped newline (a lone backslash) joined to the next."""
    lines, continued = [], False
    for line in roff.splitlines():
        if continued:
            lines[-1] += line
        else:
            lines.append(line)
        kept = _cut_comment(lines[-1])
        continued = kept == lines[-1] and (len(kept) - len(kept.rstrip("\\"))) % 2 == 1
        if continued:
            lines[-1] = kept[:-1]
    return lines


def arguments(rest):
    """The arguments of a request or macro: separated by spaces, "quoted" ones may hold spaces
    ("" in quotes is one quote); escapes stay as they are."""
    args, i, n = [], 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t":
            i += 1
        if i >= n:
            break
        arg, quoted = [], rest[i] == '"'
        i += quoted
        while i < n:
            c = rest[i]
            if quoted and c == '"':
                if rest[i + 1:i + 2] == '"':  # "" in quotes: one quote
                    arg.append('"')
                    i += 2
                    continue
                i += 1
                break
            if not quoted and c in " \t":
                break
            step = 2 if c == "\\" and i + 1 < n else 1  # an escape stays whole
            arg.append(rest[i:i + step])
            i += step
        args.append("".join(arg))
    return args


_BREAKS = {"PP", "P", "LP", "HP", "sp", "br", "in", "ti", "RS", "RE", "INDENT", "UNINDENT", "bp", "YS", "ce"}
_FONTS = {"BR", "BI", "IB", "IR", "RB", "RI"}  # alternating fonts: arguments joined without space
_TEXT = {"B", "I", "SM", "SB"}
_BULLETS = {"\u2022", "*", "-", "o", "\u00b7", "+"}
_SPACE = re.compile(r"\s+")


def prose_lines(roff):
    """The lines of one man page (see the module's docstring); `None` for a page that only
    includes another (`.so`)."""
    out, paragraph = [], []
    state = {"fill": True, "tag": False, "join": False, "url": None, "ie": True}

    def add(text, continued=False):
        """Text of one input line, into the paragraph (fill mode) or as a line (no-fill)."""
        if state["join"] and paragraph:
            paragraph[-1] += text
        else:
            paragraph.append(text)
        state["join"] = continued
        if continued:
            return
        if state["tag"] or not state["fill"]:
            state["tag"] = False
            flush()

    def flush():
        line = _SPACE.sub(" ", " ".join(paragraph)).strip()
        paragraph.clear()
        state["join"] = False
        if line:
            out.append(line)

    lines = joined_lines(roff)
    i, n = 0, len(lines)

    def skip_block(start_line):
        """Skips a conditional's \\{ ... \\} block that opens on `start_line`."""
        nonlocal i
        depth = start_line.count("\\{") - start_line.count("\\}")
        while depth > 0 and i < n:
            depth += lines[i].count("\\{") - lines[i].count("\\}")
            i += 1

    def text_line(raw):
        continued = raw.rstrip().endswith("\\c")
        text = text_of(raw.rstrip()[:-2] if continued else raw)
        if not state["fill"] or text.strip() or continued:
            add(text, continued)

    def request(line):
        nonlocal i
        match = re.match(r"^[.']\s*(\S*)\s*(.*)$", line)
        name, rest = match.group(1), match.group(2)
        if name.startswith('\\"') or not name:
            return
        if name in ("if", "ie", "el"):
            if name == "el":
                condition, body, holds = "", rest, not state["ie"]
            else:
                condition, _, body = rest.partition(" ")
                holds = condition == "n" or condition.startswith("\\n(.g") or condition.startswith("\\n[.g]")
                if name == "ie":
                    state["ie"] = holds
            if "\\{" in line:
                if holds:
                    body = body.replace("\\{", "").strip()
                else:
                    skip_block(line)
                    return
            if holds and body.strip():
                if body.lstrip().startswith((".", "'")):
                    request(body.strip())
                else:
                    text_line(body)
            return
        if name in ("de", "de1", "am", "ig"):
            end = ".." if name != "ig" or not rest.strip() else "." + rest.strip()
            while i < n and lines[i].strip() != end:
                i += 1
            i += 1
            return
        if name == "so":
            raise _Include
        args = [text_of(a) for a in arguments(rest)]
        if name in ("SH", "SS"):
            flush()
            state["fill"], state["tag"] = True, False
            if args:
                out.append(_SPACE.sub(" ", " ".join(args)).strip())
            else:
                state["tag"] = True  # the heading is on the next line
        elif name in ("TP", "TQ"):
            flush()
            state["tag"] = True
        elif name == "IP":
            flush()
            tag = args[0].strip() if args else ""
            if tag and tag not in _BULLETS:
                if len(tag) <= 4 and not tag.isalpha():  # "1.", "(a)": a number starts the paragraph
                    paragraph.append(tag)
                else:
                    out.append(tag)
        elif name in ("nf", "EX"):
            flush()
            state["fill"] = False
        elif name in ("fi", "EE"):
            flush()
            state["fill"] = True
        elif name in _BREAKS:
            flush()
        elif name == "SY":
            flush()
            paragraph.extend(args)
        elif name in _FONTS:
            continued = rest.rstrip().endswith("\\c")
            add("".join(args), continued)
        elif name in _TEXT:
            if args:
                add(" ".join(args))
        elif name == "q":  # the man-pages' quoting macro: .q "text" [after [before]]
            add((args + ["", "", ""])[2] + "\u201c" + (args + [""])[0] + "\u201d" + (args + ["", ""])[1])
        elif name in ("UR", "MT"):
            state["url"] = (args[0] if args else "", len(paragraph))
        elif name in ("UE", "ME"):
            url, start = state["url"] or ("", len(paragraph))
            state["url"] = None
            shown = url if len(paragraph) == start else f"<{url}>"
            paragraph.append(shown + ("".join(args) if args else ""))
        elif name == "TS":
            flush()
            table()
        # any other request (.TH, .ad, .nh, .hy, .PD, .ft, .ds, .nr, .ta, .ne, .IX, ...) is layout

    def table():
        """A tbl table (after .TS): each row a line, its cells joined by a space."""
        nonlocal i
        tab = "\t"
        while i < n:  # the options (ending in ';') and the format lines (the last ending in '.')
            line = lines[i].strip()
            i += 1
            found = re.search(r"tab\s*\((.)\)", line)
            if line.endswith(";") and found:
                tab = found.group(1)
            if line.endswith(".") and not line.endswith(";"):
                break
        cells, block = [], None

        def add_cells(raw):
            for cell in raw.split(tab):
                text = text_of(cell).strip()
                if text and text not in ("_", "=", "^"):
                    cells.append(text)

        def end_row():
            line = _SPACE.sub(" ", " ".join(cells)).strip()
            cells.clear()
            if line:
                out.append(line)

        while i < n:
            raw = lines[i].rstrip()
            i += 1
            stripped = raw.strip()
            if block is not None:  # inside a T{ ... T} text block
                if stripped.startswith("T}"):
                    cells.append(" ".join(block))
                    block, tail = None, stripped[2:]
                    if tail.startswith(tab):
                        tail = tail[1:]
                        if tail.endswith("T{"):
                            add_cells(tail[:-2])
                            block = []
                            continue
                        add_cells(tail)
                    end_row()
                elif not stripped.startswith((".", "'")):
                    block.append(text_of(raw))
                continue
            if stripped == ".TE":
                break
            if stripped == ".T&":  # more format lines
                while i < n and not lines[i].strip().endswith("."):
                    i += 1
                i += 1
            elif stripped and not stripped.startswith((".", "'")) and stripped not in ("_", "="):
                if raw.endswith("T{"):
                    add_cells(raw[:-2])
                    block = []
                else:
                    add_cells(raw)
                    end_row()

    while i < n:
        line = lines[i]
        i += 1
        if line.startswith((".", "'")):
            try:
                request(line)
            except _Include:
                return None
        elif not line.strip():
            if state["fill"]:
                flush()
        else:
            text_line(line)
    flush()
    return out


class _Include(Exception):
    """A page that is only `.so other-page`."""


def page_files():
    """The pages' files (no alias links), sorted by path."""
    folder = os.environ.get("ZOO_MANPAGES_DIR")
    if folder:
        if not os.path.isdir(folder):
            raise ValueError(f"The Linux man pages are not in {folder} (from ZOO_MANPAGES_DIR): point it at a "
                             f"folder holding man1/ to man8/, or unset it and run `{INSTALL}`.")
        paths = [os.path.join(folder, d, name) for d in sorted(os.listdir(folder)) if _SECTION_DIR.match(d)
                 for name in sorted(os.listdir(os.path.join(folder, d)))]
    else:
        missing = [path for path in LISTS if not os.path.isfile(path)]
        if missing:
            raise ValueError(f"The Linux man pages are not installed ({missing[0]} is missing): run `{INSTALL}` first.")
        paths = []
        for path in LISTS:
            with open(path, encoding="utf-8", errors="replace") as f:
                paths += [p.strip() for p in f if re.match(r"^/usr/share/man/man[1-8]/[^/]+$", p.strip())]
        paths = [os.path.join(MAN_DIR, os.path.relpath(p, "/usr/share/man")) for p in paths]
    paths = sorted(p for p in paths if os.path.isfile(p) and not os.path.islink(p)
                   and not LEFT_OUT.match(os.path.basename(p)))
    if not paths:
        raise ValueError(f"No Linux man page found in {folder or MAN_DIR} (dpkg may be told to leave out "
                         f"/usr/share/man): run `{INSTALL}` first.")
    return paths


def documents():
    """`(page, lines)` of every man page ("printf.3"), sorted by section and name."""
    for path in page_files():
        lines = prose_lines(read_text(path))
        if lines:
            name = os.path.basename(path)
            yield name[:-3] if name.endswith(".gz") else name, lines
