"""`zoo reproduce finetune-moe` (tools/reproduce/experiments/finetune_moe.py): its --quick run
fine-tunes the shipped gcnn-moe-en with `model.fit` and FactorizedAdam on a made-up held-out
corpus; its figures set each value beside gcnn-en's of the same id."""

import os

import pytest

import zoo
from tests.reproduce_checks import PNG_SIGNATURE, quick_result
from zoo.tools.reproduce.experiments import finetune, finetune_moe


@pytest.mark.ci
def test_quick_run_fine_tunes_the_mixture_with_factorized_adam_and_extends_its_tokenizer(tmp_path):
    out, result = quick_result("finetune-moe", tmp_path)
    settings = result["settings"]
    assert settings["preset"] == "gcnn-moe-en" and settings["arms"] == ["zero-shot", "extended", "gcnn-en-extended"]
    assert list(result["units"]) == [f"{d}/{a}" for d in finetune.DOMAINS for a in finetune_moe.ARMS]
    figures = {f["id"]: f["ours"] for f in result["figures"]}
    for domain in finetune.DOMAINS:
        zero, tuned, beside = (result["units"][f"{domain}/{a}"] for a in finetune_moe.ARMS)
        assert beside["params"] < 10_000_000 < zero["params"]  # gcnn-en (extended), beside the mixture
        assert beside["optimizer"] == zoo.registry.fine_tune_optimizer("gcnn-en")
        assert tuned["optimizer"] == zoo.registry.fine_tune_optimizer("gcnn-moe-en") == settings["fine_tune_optimizer"]
        assert tuned["optimizer"]["name"] == "factorized_adam"
        assert zero["params"] == 25_250_002 and 16_000 < tuned["vocabulary"] <= 16_040
        assert tuned["curve"][0]["val_perplexity"] == pytest.approx(zero["final_val_perplexity"], rel=0.05)
        assert tuned["steps"] >= 1 and tuned["final_val_perplexity"] < tuned["curve"][0]["val_perplexity"]
        assert figures[f"{domain}/zero-shot/test"] == zero["curve"][0]["test_perplexity"] > 1
        point = finetune.at(tuned, 0.05)
        assert figures[f"{domain}/extended@0.05min"] == point["val_perplexity"]
        assert figures[f"{domain}/extended/kept-test@0.05min"] == point["kept_test_perplexity"]
        assert not any(fid.endswith("/gcnn-en") for fid in figures)  # a quick run sets nothing beside
        assert figures[f"{domain}/steps@0.05min"] == tuned["steps"] / finetune.at(beside, 0.05)["step"]
    with open(os.path.join(out, "finetune-moe.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE


def test_each_figure_stands_beside_gcnn_ens_of_the_same_id():
    settings = dict(finetune_moe.settings(), domains=["fortunes"], report_minutes=[4.0])
    curve = [{"step": 0, "seconds": 0.0, "val_perplexity": 900.0},
             {"step": 700, "seconds": 240.0, "val_perplexity": 600.0, "minutes": [4.0], "kept_step": 700,
              "kept_test_perplexity": 500.0, "test_perplexity": 500.0}]
    units = {"fortunes/zero-shot": {"final_val_perplexity": 900.0, "curve": [{"test_perplexity": 800.0}]},
             "fortunes/extended": {"curve": curve}}
    beside = {"fortunes/zero-shot/test": 1000.0, "fortunes/extended/kept-test@4min": 400.0}
    figures = {f["id"]: f["ours"] for f in finetune_moe.figures(settings, units, beside=beside)}
    assert figures["fortunes/zero-shot/test"] == 800.0 and figures["fortunes/zero-shot/test/gcnn-en"] == 1000.0
    assert figures["fortunes/zero-shot/test/below-gcnn-en"] == pytest.approx(0.2)
    assert figures["fortunes/extended/kept-test@4min/below-gcnn-en"] == pytest.approx(-0.25)
    assert figures["fortunes/extended@4min"] == 600.0 and "fortunes/extended@4min/gcnn-en" not in figures


def test_at_equal_steps_gcnn_ens_curve_is_read_between_its_validations():
    settings = dict(finetune_moe.settings(), domains=["fortunes"], report_minutes=[4.0])
    curve = [{"step": 0, "seconds": 0.0, "val_perplexity": 900.0},
             {"step": 300, "seconds": 240.0, "val_perplexity": 600.0, "minutes": [4.0], "kept_step": 300}]
    units = {"fortunes/zero-shot": {"final_val_perplexity": 900.0, "curve": [{}]}, "fortunes/extended": {"curve": curve}}
    theirs = [{"step": 0, "val_perplexity": 1000.0}, {"step": 200, "val_perplexity": 700.0},
              {"step": 400, "val_perplexity": 500.0}]
    figures = {f["id"]: f["ours"] for f in finetune_moe.figures(settings, units,
                                                                 beside={"fortunes/extended/curve": theirs})}
    assert figures["fortunes/extended@4min/gcnn-en-equal-steps"] == pytest.approx(600.0)
    assert figures["fortunes/extended@4min/below-gcnn-en-equal-steps"] == pytest.approx(0.0)
    assert finetune_moe.at_step(theirs, 500) is None
