"""Raw-text corpora for trying the zoo on text as users have it: `python -m zoo.tools.corpora`.

One module per corpus, each with `DESCRIPTION` and `build(out, ...)`, which writes train.txt,
valid.txt and test.txt into `out` and returns the number of works (documents) and the words of
each split: `english` (the combined corpus of five packaged sources that `gcnn-en` is trained
on, held-out sources beside it) and `shakespeare` (Shakespeare alone, each work cut 90/5/5).
The sources of `english` are modules too (`sotu`, `wikipedia`, `kjv`, `python_docs`,
`shakespeare`, `fortunes`, and the technical `manpages`, `gnu_info`, `perl_doc`), each with
`documents()`; `gutenberg` and `splits` hold what they share.

    python -m zoo.tools.corpora english OUT [--sources ...] [--hold-out ...] [--one-document-per-line]
        [--train-fraction F]
    zoo train --preset gcnn-ptb --data OUT --out runs/NAME --max-minutes 4
"""

import argparse
import importlib
import sys

# corpus name -> its module in this package
CORPORA = {
    "english": "english",
    "shakespeare": "shakespeare",
}
SOURCES = CORPORA  # the former name


def source(name):
    return importlib.import_module(f"{__name__}.{CORPORA[name]}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m zoo.tools.corpora", description=__doc__.split("\n")[0],
                                epilog="corpora: " + "; ".join(f"{n}: {source(n).DESCRIPTION}" for n in CORPORA))
    p.add_argument("corpus", choices=list(CORPORA))
    p.add_argument("out", help="directory to write train.txt, valid.txt and test.txt into")
    english = source("english")
    p.add_argument("--sources", default=",".join(english.TRAINING),
                   help=f"english: the training sources, comma-separated, of {', '.join(english.SOURCES)} "
                        f"(default {','.join(english.TRAINING)})")
    p.add_argument("--hold-out", default=",".join(english.HELD_OUT),
                   help="english: sources written apart under OUT/heldout/NAME/ for fine-tuning, never in "
                        f"training (default {','.join(english.HELD_OUT)}; '' for none)")
    p.add_argument("--one-document-per-line", action="store_true",
                   help="english: each document (a speech, an article, a book) on one line")
    p.add_argument("--train-fraction", type=float, default=1.0,
                   help="english: keep this fraction of each training source's training words (whole documents, "
                        "the first in the hashed order); valid, test and held-out sources unchanged (default 1)")
    args = p.parse_args(argv)
    try:
        if args.corpus == "english":
            works, words = english.build(args.out, english.parse_names(args.sources, "source"),
                                         english.parse_names(args.hold_out, "held-out source"),
                                         args.one_document_per_line, args.train_fraction)
        else:
            works, words = source(args.corpus).build(args.out)
    except (ValueError, OSError) as e:  # an unusable source, or an OUT that cannot be written
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{works} works → {args.out}: " + ", ".join(f"{n} {w:,} words" for n, w in words.items()))
    return 0
