"""Train, valid and test splits of a corpus made of works (books, plays), and writing them."""

import os

SPLITS = (("train", 0.90), ("valid", 0.95), ("test", 1.0))  # cumulative share of each work


def split_works(works):
    """`{split: lines}` from the lines of each work: each work cut in order at 90% and 95% of its
    lines, so that every split holds a part of every work."""
    splits = {name: [] for name, _ in SPLITS}
    for lines in works:
        begin = 0
        for name, share in SPLITS:
            end = round(len(lines) * share)
            splits[name] += lines[begin:end]
            begin = end
    return splits


def write_corpus(splits, out):
    """Writes OUT/{split}.txt, a line each; returns the words of each split."""
    os.makedirs(out, exist_ok=True)
    for name, lines in splits.items():
        with open(os.path.join(out, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return {name: sum(len(line.split()) for line in lines) for name, lines in splits.items()}
