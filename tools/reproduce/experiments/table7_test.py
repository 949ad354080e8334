"""table7 and table7-en (experiments/table7.py): the trend and balance statistics on made-up
curves, and table7-en's corpus written once and refused when it is another."""

import json
import os

import pytest

import zoo
from tests.reproduce_checks import fake_record
from zoo.tools import reproduce
from zoo.tools.reproduce import curves


def test_table7_trend_and_balance_statistics(monkeypatch, tmp_path):
    def fake(exp_name, key, variant, settings, run_dir, log):
        final = {"dense": 130.0, "moe-4": 125.0, "moe-32": 118.0, "moe-256": 112.0}[key]
        balance = {} if key == "dense" else {"moe_1_cv_importance": 0.07, "moe_1_cv_load": 0.06,
                                             "moe_1_max_load_ratio": 1.2}
        return fake_record(variant["label"], final, **balance)

    monkeypatch.setattr(curves, "train_curve", fake)
    monkeypatch.setenv("ZOO_REPRODUCE_RUNS", str(tmp_path / "runs"))
    result = reproduce.reproduce("table7", out=str(tmp_path / "results"), log=lambda *a: None)
    assert result["trend"] == {"falls_with_experts": True, "every_moe_beats_dense": True}
    figure = {f["id"]: f for f in result["figures"]}
    assert figure["cv_load/moe-256"]["ours"] == 0.06 and figure["cv_load/moe-256"]["paper"] == 0.05
    assert figure["val/moe-32"]["paper"] == 39.7 and figure["val/moe-32"]["comparable"] is False
    markdown = reproduce.results_markdown([result], "results")
    assert "| — (ours PTB valid, paper 1B Word test, 10 epochs) |" in markdown
    # the variants are the models they are named after: more experts, more parameters
    variants = result["settings"]["variants"]
    params = [zoo.count_params(variants[k]["preset"], **variants[k]["overrides"]) for k in ("moe-4", "moe-32", "moe-256")]
    assert params == sorted(set(params))


def test_table7_en_writes_its_corpus_once_and_trains_every_model_one_pass_on_its_word_vocabulary(monkeypatch, tmp_path):
    from zoo.tools.corpora import english
    from zoo.tools.reproduce.experiments import table7

    built, trained = [], []

    def fake_build(out, sources, hold_out, one_document_per_line=False):
        built.append((out, tuple(sources), tuple(hold_out)))
        os.makedirs(out, exist_ok=True)
        for split in ("train", "valid", "test"):
            with open(os.path.join(out, f"{split}.txt"), "w") as f:
                f.write("the cat sat\n")
        roles = {n: "training" for n in sources} | {n: "held out" for n in hold_out}
        with open(os.path.join(out, "corpus.json"), "w") as f:
            json.dump({"sources": {n: {"role": r} for n, r in roles.items()}, "one_document_per_line": False}, f)
        return 3, {"train": 3, "valid": 3, "test": 3}

    def fake_train(exp_name, key, variant, settings, run_dir, log):
        trained.append((key, settings["data"], settings["train"], variant["epochs"]))
        return fake_record(variant["label"], {"dense": 130.0, "moe-4": 125.0, "moe-32": 118.0, "moe-256": 112.0}[key],
                           unknown_share=0.0312)

    monkeypatch.setattr(english, "build", fake_build)
    monkeypatch.setattr(curves, "train_curve", fake_train)
    corpus = str(tmp_path / "en")
    monkeypatch.setenv("ZOO_ENGLISH_CORPUS", corpus)
    monkeypatch.setenv("ZOO_REPRODUCE_RUNS", str(tmp_path / "runs"))
    result = reproduce.reproduce("table7-en", out=str(tmp_path / "results"), log=lambda *a: None)
    # every source in training, none held out, written where $ZOO_ENGLISH_CORPUS says
    assert built == [(corpus, table7.ENGLISH_SOURCES, ())] and len(table7.ENGLISH_SOURCES) == 6
    assert [k for k, *_ in trained] == ["dense", "moe-4", "moe-32", "moe-256"]
    for _, data, train, epochs in trained:
        assert data == corpus and train["tokenizer"] == "word" and train["max_vocabulary"] == 32_000 and epochs == 1
    # the same four models as table7's: only the corpus and the number of passes differ
    ptb = reproduce.experiment("table7").settings()["variants"]
    assert {k: (v["preset"], v["overrides"]) for k, v in result["settings"]["variants"].items()} == \
        {k: (v["preset"], v["overrides"]) for k, v in ptb.items()}
    figure = {f["id"]: f for f in result["figures"]}
    assert figure["val/moe-256"]["label"].endswith("validation perplexity after 1 epoch")
    assert figure["val/moe-256"]["ours_hardware"] == "English corpus valid"
    assert result["trend"] == {"falls_with_experts": True, "every_moe_beats_dense": True}
    assert ("3.12% of the validation words are <unk> (outside the vocabulary of 32,000 ids), each scored as one "
            "token, the same in every model.") in result["notes"]
    # measured again with the corpus in place: it is read, not written again
    os.remove(tmp_path / "results" / "table7-en.json")
    reproduce.reproduce("table7-en", out=str(tmp_path / "results"), log=lambda *a: None)
    assert len(built) == 1 and len(trained) == 8
    # a folder holding another corpus (sources held out) or text of its own is refused, not trained on
    other = str(tmp_path / "en-three")
    fake_build(other, ["sotu", "wikipedia", "kjv"], ["shakespeare", "python-docs", "fortunes"])
    os.remove(os.path.join(other, "train.txt"))  # ready or not, its manifest decides
    monkeypatch.setenv("ZOO_ENGLISH_CORPUS", other)
    with pytest.raises(ValueError, match=r"en-three' holds an English corpus of other sources \(training: kjv, sotu, "
                                         r"wikipedia; held out: fortunes, python-docs, shakespeare\); table7-en needs"):
        reproduce.reproduce("table7-en", out=str(tmp_path / "other"), log=lambda *a: None)
    plain = tmp_path / "mine"
    plain.mkdir()
    (plain / "train.txt").write_text("my own text\n")
    monkeypatch.setenv("ZOO_ENGLISH_CORPUS", str(plain))
    with pytest.raises(ValueError, match="holds a train.txt but no corpus.json"):
        reproduce.reproduce("table7-en", out=str(tmp_path / "mine-results"), log=lambda *a: None)
    assert len(built) == 2 and len(trained) == 8 and not os.path.exists(tmp_path / "other" / "table7-en.json")
