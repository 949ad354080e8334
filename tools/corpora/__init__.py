"""Raw-text corpora for trying the zoo on text as users have it: `python -m zoo.tools.corpora`.

One module per source, each with `DESCRIPTION` and `build(out)`, which writes train.txt,
valid.txt and test.txt into `out` and returns the number of works and the words of each split;
`gutenberg` and `splits` hold what sources share.

    python -m zoo.tools.corpora SOURCE OUT
    zoo train --preset gcnn-ptb --data OUT --out runs/NAME --max-minutes 4
"""

import argparse
import importlib
import sys

# source name -> its module in this package
SOURCES = {
    "shakespeare": "shakespeare",
}


def source(name):
    return importlib.import_module(f"{__name__}.{SOURCES[name]}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m zoo.tools.corpora", description=__doc__.split("\n")[0],
                                epilog="sources: " + "; ".join(f"{n}: {source(n).DESCRIPTION}" for n in SOURCES))
    p.add_argument("corpus", choices=list(SOURCES))
    p.add_argument("out", help="directory to write train.txt, valid.txt and test.txt into")
    args = p.parse_args(argv)
    try:
        works, words = source(args.corpus).build(args.out)
    except (ValueError, OSError) as e:  # an unusable source, or an OUT that cannot be written
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{works} works → {args.out}: " + ", ".join(f"{n} {w:,} words" for n, w in words.items()))
    return 0
