"""The Linux man pages' roff to lines, on made-up pages."""

import gzip

import pytest

from zoo.tools.corpora import manpages

PAGE = r""".\" Copyright (c) a comment, dropped
'\" t
.TH FOO 3 2023-01-01 "Linux man-pages 6.03"
.SH NAME
foo, bar \- do things to a \fIthing\fP
.SH SYNOPSIS
.nf
.B #include <foo.h>
.PP
.BI "int foo(int " x ", const char *" s \
", ...);"
.fi
.SH DESCRIPTION
The
.BR foo ()
function does things\(emmost of them
\fBwell\fR, see
.BR bar (2).
Its name's quotes are \[lq]smart\[rq];  it costs \[Do]5.
.PP
.UR https://example.org/foo
The home page
.UE .
.SS Options
.TP
.BR \-a ", " \-\-all
Do \fIall\fP the things,
including \e and \(aqquotes\(aq.
.IP \(bu 2
A bullet is dropped.
.IP 2. 4
A number is kept.
.EX
if (x < 0)
    return \-1;
.EE
.TS
l l.
EINVAL	T{
an invalid argument
T}
_
ENOMEM	out of memory
.TE
.if t .sp 0.5
.ie n \{\
Shown by man.
.\}
.el \{\
Typeset only.
.\}
"""


def write_page(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)


def test_man_pages_become_lines_without_markup(tmp_path, monkeypatch):
    write_page(tmp_path / "man3" / "foo.3.gz", PAGE)
    write_page(tmp_path / "man3" / "foo_alias.3.gz", ".so man3/foo.3\n")  # an alias: left out
    (tmp_path / "man3" / "bar.3.gz").symlink_to(tmp_path / "man3" / "foo.3.gz")  # a link: left out
    write_page(tmp_path / "man7" / "iso_8859-1.7.gz", ".SH NAME\niso_8859-1 \\- a code chart\n")  # left out
    write_page(tmp_path / "man9" / "other.9.gz", ".SH NAME\nnot a section of the packages\n")
    monkeypatch.setenv("ZOO_MANPAGES_DIR", str(tmp_path))
    assert list(manpages.documents()) == [("foo.3", [
        "NAME",
        "foo, bar - do things to a thing",
        "SYNOPSIS",
        "#include <foo.h>",
        'int foo(int x, const char *s, ...);',
        "DESCRIPTION",
        "The foo() function does things\u2014most of them well, see bar(2). "
        "Its name's quotes are \u201csmart\u201d; it costs $5.",
        "The home page <https://example.org/foo>.",
        "Options",
        "-a, --all",
        "Do all the things, including \\ and 'quotes'.",
        "A bullet is dropped.",
        "2. A number is kept.",
        "if (x < 0)",
        "return -1;",
        "EINVAL an invalid argument",
        "ENOMEM out of memory",
        "Shown by man."])]


def test_missing_man_pages_name_the_packages(tmp_path, monkeypatch):
    monkeypatch.delenv("ZOO_MANPAGES_DIR", raising=False)
    monkeypatch.setattr(manpages, "LISTS", (str(tmp_path / "manpages.list"),))
    with pytest.raises(ValueError, match=r"not installed .*run `apt-get install manpages manpages-dev` first\.$"):
        list(manpages.documents())
    monkeypatch.setenv("ZOO_MANPAGES_DIR", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="apt-get install manpages manpages-dev"):
        list(manpages.documents())
