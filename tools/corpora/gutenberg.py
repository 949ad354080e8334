"""Texts from Project Gutenberg: a work's lines without the project's header and footer."""

import re

START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.I)
END = re.compile(r"^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.I)


def work_lines(path):
    """The non-empty lines of one text, without a Project Gutenberg header or footer if it has one."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        lines = [line.rstrip("\r\n") for line in f]
    start = next((i for i, line in enumerate(lines) if START.match(line)), None)
    if start is not None:
        lines = lines[start + 1:]
    end = next((i for i, line in enumerate(lines) if END.match(line)), None)
    return [line for line in lines[:end] if line.strip()]
