"""The Perl documentation (the language reference, perlfunc, perlop, perlsyn, perlre, the
tutorials, the FAQ, the internals), from the POD sources in Debian's package `perl-doc`, read
from /usr/share/perl/5.X/pod (the newest installed; or `$ZOO_PERL_POD_DIR`):

    apt-get install perl-doc

A page (perlfunc.pod) is a document. The POD becomes lines: each paragraph of prose is a line,
headings (=head1 to =head4) and the labels of =item lists are lines of their own (a bullet item's
"*" is dropped, a number kept before its text), and verbatim (code) paragraphs are kept, each of
their lines a line, since code and symbols are part of technical text. Formatting codes keep
their text (B<bold>, C<code>, F<file>, S<...>, C<< $a <=> $b >>), E<lt> and other escapes become
their characters, links read as perldoc shows them (L<perlfunc/open> is '"open" in perlfunc',
L<text|target> is "text"), X<> index entries and Z<> are dropped, and so are =for and =begin
blocks (for other formatters) and whatever follows =cut. Runs of white space become one space.

Left out: the release notes (perl5*delta, perldelta: lists of changes), the table of contents
(perltoc), the licence texts (perlartistic, perlgpl), the generated table of Unicode properties
(perluniprops) and the pages not in English (perlcn, perljp, perlko, perltw).
"""

import glob
import html
import os
import re

DESCRIPTION = "the Perl documentation: perlfunc, perlop, perlsyn, perlre, tutorials, FAQ (apt-get install perl-doc)"
PACKAGE = "perl-doc 5.36.0-7+deb12u4 (Debian; Perl 5.36.0)"
LICENSE = "GPL-1+ or Artistic (Perl's own terms), Debian main"
KIND = "technical documentation: a programming language"
POD_GLOB = "/usr/share/perl/5.*/pod"
LEFT_OUT = re.compile(r"^(perl\d+delta|perldelta|perltoc|perlartistic|perlgpl|perluniprops|perlcn|perljp|perlko|perltw)$")
_SPACE = re.compile(r"\s+")
_CODE = re.compile(r"([A-Z])(<+)")
_NUMBERED = re.compile(r"^\(?\d+[.)]?$")


def pod_folder():
    """`$ZOO_PERL_POD_DIR`, or the newest installed perl-doc's pod folder."""
    folder = os.environ.get("ZOO_PERL_POD_DIR")
    if folder:
        if not os.path.isdir(folder):
            raise ValueError(f"The Perl documentation is not in {folder} (from ZOO_PERL_POD_DIR): point it at a "
                             "folder of .pod files, or unset it and run `apt-get install perl-doc`.")
        return folder
    found = sorted((p for p in glob.glob(POD_GLOB) if glob.glob(os.path.join(p, "perlfunc.pod"))),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
    if not found:
        raise ValueError(f"The Perl documentation is not installed: run `apt-get install perl-doc` first; "
                         f"looked for {POD_GLOB}/perlfunc.pod.")
    return found[-1]


def _render(letter, inner):
    if letter in "XZ":
        return ""
    if letter == "E":
        name = inner.strip()
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", name):
            return chr(int(name, 16))
        if re.fullmatch(r"\d+", name):
            return chr(int(name, 8) if name.startswith("0") else int(name))
        known = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}
        return known.get(name) or html.unescape(f"&{name};").replace(f"&{name};", "")
    if letter == "L":
        text, bar, target = inner.partition("|")
        if bar:
            return text
        if re.match(r"\w+:[^:\s]\S*$", inner):  # a URL
            return inner
        if "/" in inner:
            page, _, section = inner.partition("/")
            section = section.strip('"')
            return f'"{section}" in {page}' if page else f'"{section}"'
        return inner.strip('"')
    return inner  # B, I, C, F, S and others: their text


def _codes(text, i=0, close=None):
    """`(rendered text, end)` from `i` up to the closing bracket(s) of the code being read
    (`close`: None for the whole text, 1 for ">", n for " >>..." of n brackets)."""
    out = []
    while i < len(text):
        if close == 1 and text[i] == ">":
            return "".join(out), i + 1
        if close and close > 1:
            end = re.compile(r"\s+" + ">" * close).match(text, i)
            if end:
                return "".join(out), end.end()
        code = _CODE.match(text, i)
        if code:
            letter, brackets = code.group(1), len(code.group(2))
            if brackets > 1 and code.end() < len(text) and text[code.end()].isspace():
                inner, i = _codes(text, code.end(), brackets)
                inner = inner.lstrip()
            else:
                inner, i = _codes(text, code.start() + 2, 1)
            out.append(_render(letter, inner))
            continue
        out.append(text[i])
        i += 1
    return "".join(out), i


def inline_text(text):
    return _SPACE.sub(" ", _codes(text)[0]).strip()


def prose_lines(pod):
    """The lines of one POD page (see the module's docstring)."""
    out, prefix, in_pod, skip_to = [], None, False, None
    paragraphs = re.split(r"\n[ \t]*\n", pod.replace("\r\n", "\n"))
    for paragraph in paragraphs:
        if not paragraph.strip():
            continue
        paragraph = paragraph.strip("\n")
        command = re.match(r"^=([a-zA-Z]\w*)\s*(.*)$", paragraph, re.DOTALL)
        if skip_to:
            if command and command.group(1) == "end" and command.group(2).split()[:1] == [skip_to]:
                skip_to = None
            continue
        if command:
            name, rest = command.group(1), command.group(2)
            in_pod = name != "cut"
            if name.startswith("head"):
                heading = inline_text(rest)
                if heading:
                    out.append(heading)
            elif name == "item":
                label = inline_text(rest)
                if label in ("", "*", "o", "-", "\u2022"):
                    prefix = None
                elif label.startswith("* "):
                    out.append(label[2:])
                elif _NUMBERED.match(label):
                    prefix = label
                else:
                    out.append(label)
            elif name == "begin":
                skip_to = (rest.split() or [""])[0]
            # =over, =back, =pod, =encoding and =for (a paragraph for another formatter): nothing
            continue
        if not in_pod:
            continue
        if paragraph[:1] in (" ", "\t"):  # verbatim: code, a line each
            out.extend(_SPACE.sub(" ", line).strip() for line in paragraph.splitlines() if line.strip())
            continue
        text = inline_text(paragraph)
        if text:
            out.append(f"{prefix} {text}" if prefix else text)
        prefix = None
    return out


def read_pod(path):
    with open(path, "rb") as f:
        data = f.read()
    declared = re.search(rb"^=encoding\s+(\S+)", data, re.MULTILINE)
    try:
        return data.decode(declared.group(1).decode("ascii") if declared else "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def documents():
    """`(page, lines)` of every page, sorted by name ("perlfunc")."""
    folder = pod_folder()
    for path in sorted(glob.glob(os.path.join(folder, "*.pod"))):
        name = os.path.basename(path)[:-len(".pod")]
        if LEFT_OUT.match(name):
            continue
        lines = prose_lines(read_pod(path))
        if lines:
            yield name, lines
