"""GNU Info manuals to lines, on a made-up manual split in two files as makeinfo writes them."""

import gzip

import pytest

from zoo.tools.corpora import gnu_info

MAIN = """This is sed.info, produced by makeinfo version 6.7 from sed.texi.

     Permission is granted to copy, distribute and/or modify this
     document under the terms of the GNU Free Documentation License.
INFO-DIR-SECTION Text creation and manipulation
START-INFO-DIR-ENTRY
* sed: (sed).                   Stream EDitor.
END-INFO-DIR-ENTRY

\x1f
Indirect:
sed.info-1: 300
sed.info-2: 1500
\x1f
Tag Table:
(Indirect)
Node: Top300
\x1f
End Tag Table
"""

PART_1 = """\x1f
File: sed.info,  Node: Top,  Next: Invoking sed,  Up: (dir)

GNU ‘sed’
*********

This file documents version 4.9 of GNU ‘sed’, a stream editor.

* Menu:

* Invoking sed::        How to run it.
\x1f
File: sed.info,  Node: Invoking sed,  Next: Index,  Prev: Top,  Up: Top

2.1 Overview
============

Normally ‘sed’ is invoked like this (*note Scripts: sed scripts.):

     sed SCRIPT INPUTFILE...

   For example, to change every ‘hello’ to ‘world’ in the file
‘input.txt’, see *note Overview::.  *Note Regexps: (grep)Regular
Expressions, for more.

‘-n’
‘--quiet’
     By default, ‘sed’ prints out the pattern space at the end of each
     cycle through the script.
          $ seq 3 | sed -n 2p
          2

   The options are:
   • ‘-s’, to consider files as separate rather than as a single
     continuous long stream;
   • ‘-u’, to buffer _as little_ as possible.

 -- Command: q [EXIT-CODE]
     Exit without processing any more commands(1).

   ---------- Footnotes ----------

   (1) Or input.
"""

PART_2 = """\x1f
File: sed.info,  Node: GNU Free Documentation License,  Up: Top

Version 1.3, 3 November 2008
\x1f
File: sed.info,  Node: Index,  Prev: Invoking sed,  Up: Top

Index
*****

\x00\x08[index\x00\x08]
* Menu:

* sed:                                   Overview.             (line 6)
"""


def write(path, text):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)


def test_info_nodes_become_lines_without_markup(tmp_path, monkeypatch):
    write(tmp_path / "sed.info.gz", MAIN)
    write(tmp_path / "sed.info-1.gz", PART_1)
    write(tmp_path / "sed.info-2.gz", PART_2)
    monkeypatch.setenv("ZOO_INFO_DIR", str(tmp_path))
    monkeypatch.setattr(gnu_info, "MANUALS", {"sed": "sed"})
    assert list(gnu_info.documents()) == [
        ("sed/Top", ["GNU ‘sed’", "This file documents version 4.9 of GNU ‘sed’, a stream editor."]),
        ("sed/Invoking sed", [
            "Overview",
            "Normally ‘sed’ is invoked like this (see Scripts):",
            "sed SCRIPT INPUTFILE...",
            "For example, to change every ‘hello’ to ‘world’ in the file ‘input.txt’, see Overview. "
            "See Regexps, for more.",
            "‘-n’",
            "‘--quiet’",
            "By default, ‘sed’ prints out the pattern space at the end of each cycle through the script.",
            "$ seq 3 | sed -n 2p",
            "2",
            "The options are:",
            "• ‘-s’, to consider files as separate rather than as a single continuous long stream;",
            "• ‘-u’, to buffer as little as possible.",
            "Command: q [EXIT-CODE]",
            "Exit without processing any more commands(1).",
            "(1) Or input."])]


def test_missing_manuals_name_their_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_INFO_DIR", str(tmp_path))
    write(tmp_path / "sed.info.gz", MAIN)
    with pytest.raises(ValueError, match=r"\(of coreutils, grep, .*\): run `apt-get install coreutils sed grep "
                                         r"findutils diffutils gzip bash-doc time ed wget` first\.$"):
        list(gnu_info.documents())
