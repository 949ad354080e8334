"""`zoo reproduce finetune` (tools/reproduce/experiments/finetune.py): its --quick run fine-tunes the
shipped gcnn-en with `model.fit` on a made-up held-out corpus, trains the preset from scratch
beside it and writes the figures and the plot; the figures are derived from the units."""

import math
import os

import pytest

import zoo
from tests.reproduce_checks import PNG_SIGNATURE, quick_result
from zoo.tools import reproduce
from zoo.tools.reproduce.experiments import finetune


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return quick_result("finetune", tmp_path_factory.mktemp("finetune"))


@pytest.mark.ci
def test_quick_run_measures_every_unit_and_derives_the_reduction(quick_run):
    out, result = quick_run
    arms = finetune.ARMS + (finetune.EXTENDED,)
    assert list(result["units"]) == [f"{d}/{a}" for d in finetune.DOMAINS for a in arms]
    figures = {f["id"]: f["ours"] for f in result["figures"]}
    for domain in finetune.DOMAINS:
        units = {a: result["units"][f"{domain}/{a}"] for a in finetune.ARMS}
        zero = units["zero-shot"]
        # the fine-tuned run starts where zero-shot is: the same weights, the same validation lines
        assert units["pretrained"]["curve"][0]["val_perplexity"] == pytest.approx(zero["final_val_perplexity"], rel=1e-5)
        assert units["pretrained"]["vocabulary"] == 16_000 and units["scratch"]["vocabulary"] < 16_000
        for arm in ("pretrained", "scratch"):
            curve = units[arm]["curve"]
            assert units[arm]["steps"] >= 1 and curve[-1]["step"] == units[arm]["steps"]
            assert units[arm]["final_val_perplexity"] == curve[-1]["val_perplexity"]
            assert all(math.isfinite(c["val_perplexity"]) for c in curve)
        want = 1 - units["pretrained"]["final_val_perplexity"] / units["scratch"]["final_val_perplexity"]
        assert figures[f"{domain}/reduction"] == pytest.approx(want)
        # the extended arm: gcnn-en's ids and up to 40 more, learned from the domain
        extended = result["units"][f"{domain}/{finetune.EXTENDED}"]
        assert 16_000 < extended["vocabulary"] <= 16_040 and extended["steps"] >= 1
        want = 1 - extended["final_val_perplexity"] / units["scratch"]["final_val_perplexity"]
        assert figures[f"{domain}/reduction-extended"] == pytest.approx(want)
        assert any(note.startswith(f"{domain}: zero-shot") for note in result["notes"])
    with open(os.path.join(out, "finetune.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE


def test_records_without_extend_ids_keep_their_four_arms():
    settings = dict(finetune.settings(quick=True))
    del settings["extend_ids"]
    assert finetune.arms(settings) == finetune.ARMS
    assert finetune.units(settings)[:4] == [f"shakespeare/{a}" for a in finetune.ARMS]


def test_finetune_is_listed_and_refuses_repeats():
    assert "finetune" in [name for name, _, _ in reproduce.list_experiments()]
    with pytest.raises(ValueError, match="--repeats does not apply"):
        finetune.settings(repeats=3)
    assert finetune.settings(minutes=7)["minutes"] == 7.0


def test_a_missing_held_out_source_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(ValueError, match=r"No held-out source 'shakespeare' in .*: build it with `python -m "
                                         r"zoo.tools.corpora english"):
        finetune.run_unit("shakespeare/scratch", finetune.settings(quick=True), str(tmp_path), print)


def test_first_words_keeps_whole_lines_up_to_the_count():
    assert finetune.first_words(["a b", "c d e", "f"], 4) == ["a b", "c d e"]
    assert finetune.first_words(["a b"], 10) == ["a b"]
    assert zoo.data.corpus.scored_words(["a b", "c d e"]) == 7
