"""The model card's figures (tools/reproduce/model_card.py) from a made-up run, corpus and model:
the training figures read from `history.json` and the log beside the run, per-word figures on
each split, and the JSON naming every figure (the corpus's test split, each source's, the probe)."""

import json
import os

import pytest

import zoo
import zoo.weights
from zoo.tools.reproduce import model_card


class Tokenizer:
    """Two pieces a word, plus </s>, after <s>."""

    def encode(self, line):
        return [1] + [5, 6] * len(line.split()) + [2]

    def __len__(self):
        return 300


class Model:
    """A perplexity of 10 times the number of lines it is asked about."""

    tokenizer = Tokenizer()

    def perplexity(self, lines, per="word", mode="stream"):
        assert per == "word"
        return 10.0 * len(lines)

    def generate(self, prompts, max_new_tokens, sampler, stop):
        return [f"{p} ... ({max_new_tokens} {sampler})" for p in prompts]

    def count_params(self):
        return 4321


def write_run(run, with_log=True):
    os.makedirs(run)
    history = [{"step": 100, "seconds": 600, "val_perplexity": 90.0, "val_perplexity_per_word": 120.0, "loss": 4.6},
               {"step": 200, "seconds": 1230, "val_perplexity": 80.0, "val_perplexity_per_word": 100.0, "loss": 4.4},
               {"step": 300, "seconds": 1800, "val_perplexity": 85.0, "val_perplexity_per_word": 110.0, "loss": 4.3}]
    with open(os.path.join(run, "history.json"), "w") as f:
        json.dump(history, f)
    if with_log:
        open(run + ".log", "w").close()


def test_training_figures_come_from_the_history_and_the_log_beside_the_run(tmp_path):
    run = str(tmp_path / "gcnn-en")
    write_run(run)
    figures = model_card.training_figures(run + "/")
    assert (figures["steps"], figures["minutes"], figures["best_step"], figures["best_val_per_word"]) == \
        (300, 30.0, 200, 100.0)
    assert figures["log"] == "runs/gcnn-en.log" and len(figures["validations"]) == 3  # no path of this machine
    os.remove(run + ".log")
    assert model_card.training_figures(run)["log"] is None


def test_evaluate_counts_pieces_per_scored_word(tmp_path):
    (tmp_path / "test.txt").write_text("the cat sat\nthe end\n")
    figures = model_card.evaluate(Model(), str(tmp_path), "test")
    # 5 words + 2 </s> scored; 2 pieces a word + </s> a line: 12 pieces
    assert (figures["per_word"], figures["scored_words"], figures["lines"]) == (20.0, 7, 2)
    assert figures["tokens_per_word"] == pytest.approx(12 / 7)


def test_the_card_names_every_figure(tmp_path, monkeypatch, capsys):
    package = tmp_path / "package"
    shipped = package / "trained_weights" / "made-up"
    shipped.mkdir(parents=True)
    (shipped / "model.weights.h5").write_bytes(b"weights")
    monkeypatch.setattr(zoo.weights, "PACKAGE_DIR", str(package))
    loaded = []
    monkeypatch.setattr(zoo, "load", lambda where, **kw: loaded.append((where, kw)) or Model())
    monkeypatch.setattr(model_card, "git_state", lambda: {"commit": "abc"})
    monkeypatch.setattr(model_card, "machine", lambda: {"cores": 2})
    corpus = tmp_path / "corpus"
    sources = {"fed": "training", "bible": "heldout"}
    for name, role in sources.items():
        folder = corpus / ("sources" if role == "training" else "heldout") / name
        folder.mkdir(parents=True)
        (folder / "test.txt").write_text("a b\n" * (2 if role == "training" else 3))
    (corpus / "test.txt").write_text("a b\nc\n")
    source = {"kind": "k", "package": "p", "license": "l", "documents": 1, "words": 9}
    (corpus / "corpus.json").write_text(json.dumps({
        "sources": {name: {"role": role, **source} for name, role in sources.items()},
        "training_words": 100, "total_words": 200, "split": "by document"}))
    run = str(tmp_path / "run")
    write_run(run)
    out = tmp_path / "card.json"
    assert model_card.main(["made-up", "--run", run, "--corpus", str(corpus), "--out", str(out)]) == 0
    assert loaded == [(str(shipped), {})]  # no TRAINED entry names these weights: the directory
    assert json.loads(out.read_text())["command"] == \
        f"python -m zoo.tools.reproduce.model_card made-up --run runs/run --corpus corpora/corpus --out {out}"
    card = json.loads(out.read_text())
    assert {k: v["per_word"] for k, v in card["figures"].items()} == {"test": 20.0, "fed/test": 20.0,
                                                                      "bible/test": 30.0}
    assert card["probe"]["per_word"] == 30.0 and len(card["probe"]["greedy"]) == 3
    assert card["file_bytes"] == {"model.weights.h5": 7} and card["training"]["best_step"] == 200
    assert card["sources"]["bible"]["role"] == "heldout" and card["vocabulary"] == 300
    printed = capsys.readouterr().out
    assert "bible (heldout): test perplexity 30.00 per word" in printed and "test perplexity 20.00" in printed


def test_a_missing_required_flag_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        model_card.main(["made-up", "--corpus", "c", "--out", "o"])
    assert "the following arguments are required: --run" in capsys.readouterr().err
