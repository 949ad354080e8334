"""The README and docs/ point only at things that exist: every relative link names a file of the
checkout, and every `#anchor` names a heading of the page it points into (anchors made the way
GitHub makes them). Links inside code blocks and code spans are not links and are skipped."""

import collections
import os
import re
import unicodedata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


FENCE = re.compile(r"^ {0,3}(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, …


def documents():
    pages = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    for folder, _, files in os.walk(docs):
        pages += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return pages


def prose_lines(path, keep_code_spans=False):
    """(line number, text) of the lines outside fenced code blocks; code spans blanked unless
    `keep_code_spans` (a heading's anchor includes their text)."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
            elif not inside:
                yield number, line if keep_code_spans else re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def slug(text):
    """GitHub's anchor for a heading: the rendered text lower-cased, punctuation dropped, spaces
    made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays, its target goes
    text = text.replace("`", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path):
    seen = collections.Counter()
    found = set()
    for _, line in prose_lines(path, keep_code_spans=True):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def links(path):
    for number, line in prose_lines(path):
        for match in LINK.finditer(line):
            target = match.group(1)
            if not EXTERNAL.match(target):
                yield number, target


def resolve(page, target):
    """(file the link points at, anchor or None)."""
    file, _, anchor = target.partition("#")
    path = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
    return path, anchor or None


def test_slug_follows_github():
    assert slug("Weights: random, trained, a file, or an address") == "weights-random-trained-a-file-or-an-address"
    assert slug("table7: Shazeer et al. 2017, Appendix C, Tables 6 and 7") == \
        "table7-shazeer-et-al-2017-appendix-c-tables-6-and-7"
    assert slug("figure3 (in results/long/): Dauphin et al. 2016, §5.2, Figure 3") == \
        "figure3-in-resultslong-dauphin-et-al-2016-52-figure-3"
    assert slug("`layers/` → `zoo.layers`") == "layers--zoolayers"


def test_links_skip_code_and_external_targets(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](a.md) `[b](b.md)` [c](https://example.org/c.md)\n```\n[d](d.md)\n```\n[e](e.md#x)\n",
                    encoding="utf-8")
    assert list(links(str(page))) == [(1, "a.md"), (5, "e.md#x")]


@pytest.mark.parametrize("page", documents(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(page):
    broken = []
    for number, target in links(page):
        path, anchor = resolve(page, target)
        where = f"{os.path.relpath(page, ROOT)}:{number}: {target}"
        if not os.path.exists(path):
            broken.append(f"{where} (no file {os.path.relpath(path, ROOT)})")
        elif anchor:
            if not path.endswith(".md"):
                broken.append(f"{where} (an anchor into a file that is not Markdown)")
            elif anchor not in anchors(path):
                broken.append(f"{where} (no heading #{anchor} in {os.path.relpath(path, ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_one_screen():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to a page of docs/"
