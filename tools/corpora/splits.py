"""Train, valid and test splits of a corpus made of works or documents, reading and writing them."""

import gzip
import hashlib
import os
import shutil
import tempfile

SPLITS = (("train", 0.90), ("valid", 0.95), ("test", 1.0))  # cumulative share of each work


def read_text(path):
    """A source file's text, gunzipped when its name ends in .gz (man pages, Info manuals); bytes
    that are not UTF-8 become U+FFFD."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


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


def document_order(source, name):
    """Where a document falls in its source's shuffled order: a hash of the two names, so that
    a document's split depends on nothing else (adding a document moves no other)."""
    return hashlib.sha256(f"{source}/{name}".encode()).hexdigest()


def split_documents(source, documents):
    """`{split: [(name, lines)]}`: whole documents, in the hashed order, to train until 90% of the
    words, then valid until 95%, the rest to test; each split gets a document when there are 3."""
    documents = sorted(documents, key=lambda d: document_order(source, d[0]))
    words = [sum(len(line.split()) for line in lines) for _, lines in documents]
    total = sum(words) or 1
    splits = {name: [] for name, _ in SPLITS}
    done = 0
    for i, (document, count) in enumerate(zip(documents, words)):
        left = len(documents) - i
        name = next(n for n, share in SPLITS if done < share * total)
        if name == "train" and left <= 2 and not splits["valid"]:
            name = "valid" if left == 2 else "test"
        elif name != "test" and left == 1 and not splits["test"]:
            name = "test"
        splits[name].append(document)
        done += count
    return splits


def words_of(lines):
    return sum(len(line.split()) for line in lines)


def write_files(files, out):
    """Writes `files` (`{path relative to OUT: lines or text}`) under OUT. They are written into a
    temporary folder beside OUT and moved into place only when all are complete, so a failure
    (a full disk, a bad source) leaves an existing OUT as it was."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    try:
        for relative, content in files.items():
            path = os.path.join(staging, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(content if isinstance(content, str) else "\n".join(content) + "\n")
        for relative in files:
            os.makedirs(os.path.dirname(os.path.join(out, relative)), exist_ok=True)
            os.replace(os.path.join(staging, relative), os.path.join(out, relative))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_splits(splits, out):
    """Writes OUT/{split}.txt (`splits`: `{split: lines}`), a line each, as `write_files` does;
    returns the words of each split."""
    write_files({f"{name}.txt": lines for name, lines in splits.items()}, out)
    return {name: words_of(lines) for name, lines in splits.items()}


write_corpus = write_splits
