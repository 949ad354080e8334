"""What the training-curve experiments share (tools/reproduce/curves.py): the --quick run of each
(figure3, figure5, figure6, ptb-sentence, table7, ptb-recipe, figure3-deep, depth-sweep, table7-en and
figure5-deep: tiny models on the treebank's first lines, the CI smoke test of each), a variant's own
batch and vocabulary. The experiments' own orderings and sweeps, on made-up curves: their
*_test.py files in experiments/."""

import json
import math
import os

import numpy as np
import pytest

from tests.reproduce_checks import PNG_SIGNATURE
from zoo.tools import cli, reproduce
from zoo.tools.reproduce import curves
from zoo.tools.reproduce.experiments import ptb_sentence


CURVE_EXPERIMENTS = ("figure3", "figure5", "figure6", "ptb-sentence", "table7", "ptb-recipe", "figure3-deep", "depth-sweep",
                     "table7-en", "figure5-deep")


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("curves") / "results")
    for name in CURVE_EXPERIMENTS:
        assert cli.main(["reproduce", name, "--quick", "--out", out]) == 0
    results = {}
    for name in CURVE_EXPERIMENTS:
        with open(os.path.join(out, f"{name}.json")) as f:
            results[name] = json.load(f)
    return out, results


def test_every_curve_experiment_is_listed():
    names = [name for name, _, _ in reproduce.list_experiments()]
    for name in CURVE_EXPERIMENTS:
        assert name in names
        assert reproduce.experiment(name).NAME == name


def test_a_variant_with_its_own_batch_trains_and_plans_its_passes_with_it(monkeypatch, tmp_path):
    corpus = tmp_path / "text"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 3000), ("valid", 20), ("test", 20)):
        (corpus / f"{split}.txt").write_text("\n".join(" ".join(rng.choice(list("abcdefgh"), 9)) for _ in range(n)) + "\n")
    settings = dict(reproduce.experiment("ptb-recipe").settings(), data=str(corpus))
    own, base = settings["variants"]["tied-deep8-b16-20"], settings["variants"]["tied-deep8-20"]
    batch = own["train"]["global_batch_size"]
    assert batch != 32  # the preset's own batch, which `base` keeps
    # the stream of 3,000 lines cuts into 516 windows of 64 tokens: 16 batches of 32 a pass
    assert curves.planned_steps(settings, base) == base["epochs"] * (516 // 32)
    assert curves.planned_steps(settings, own) == own["epochs"] * (516 // batch)
    seen = []
    monkeypatch.setattr("zoo.training.train", lambda preset, config, **kw: seen.append(config))
    unit = curves.train_curve("t", "b16", own, settings, str(tmp_path / "run"), lambda *a: None)
    steps = own["epochs"] * (516 // batch)
    assert (seen[0].global_batch_size, seen[0].steps_per_epoch, seen[0].steps) == (
        batch, own["train"]["validate_every"], steps)
    assert unit["planned_steps"] == steps


@pytest.mark.ci  # two short training runs
def test_a_curve_run_trains_on_the_word_vocabulary_its_settings_ask_for(tmp_path):
    corpus = tmp_path / "text"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(60)]
    for split, n in (("train", 400), ("valid", 40), ("test", 40)):
        (corpus / f"{split}.txt").write_text("\n".join(" ".join(rng.choice(words, 8)) for _ in range(n)) + "\n")
    settings = reproduce.experiment("table7-en").settings(quick=True)
    settings = dict(settings, data=str(corpus))
    variant = settings["variants"]["dense"]
    shares = {}
    for size in (None, 20):
        settings["train"] = dict(settings["train"], max_vocabulary=size)
        unit = curves.train_curve("t", "dense", variant, settings, str(tmp_path / f"run-{size}"), lambda *a: None)
        shares[size] = unit["curve"][-1]["unknown_share"]
    assert shares[None] == 0.0  # every word of valid is in the training text
    # 20 ids with the specials: most of the 60 words are <unk>
    assert 0.5 < shares[20] < 1.0


@pytest.mark.ci  # four quick training runs of every curve experiment
def test_quick_runs_write_curves_figures_and_plots(quick_runs):
    out, results = quick_runs
    for name, result in results.items():
        assert result["quick"] is True and result["command"] == f"zoo reproduce {name} --quick --out {out}"
        assert list(result["units"]) == list(result["settings"]["variants"])
        for key, unit in result["units"].items():
            assert unit["steps"] == 4 and unit["diverged"] is None, (name, key)
            assert [c["step"] for c in unit["curve"]] == [4]
            assert math.isfinite(unit["final_val_perplexity"]) and unit["final_val_perplexity"] > 1
            assert unit["params"] > 0 and unit["run_dir"] is None
        assert result["notes"] and result["figures"]
        with open(os.path.join(out, f"{name}.png"), "rb") as f:
            assert f.read(8) == PNG_SIGNATURE
    assert not [p for p in os.listdir(out) if p.endswith(".partial.json")]


@pytest.mark.ci  # reads the quick runs
def test_quick_ptb_sentence_scores_float16_weights_like_float32(quick_runs):
    _, results = quick_runs
    for key in ("gcnn", "gcnn-deep", "lstm"):
        u = results["ptb-sentence"]["units"][key]
        assert u["test_lines"] == curves.QUICK_LINES["test"]
        assert u["float16_test_sentence"] == pytest.approx(u["test_sentence"], rel=1e-3)
        assert u["float16_test_stream"] == pytest.approx(u["test_stream"], rel=1e-3)
        assert 0 < u["float16_max_abs_weight_change"] < 1e-2
        # every parameter is stored in two bytes instead of four; the file's own bytes do not change
        assert abs(u["float32_bytes"] - u["float16_bytes"] - 2 * u["params"]) < 0.02 * 2 * u["params"]
    figure = {f["id"]: f for f in results["ptb-sentence"]["figures"]}
    assert figure["test-sentence/gcnn"]["paper"] == 108.7 and figure["test-sentence/lstm"]["paper"] == 109.3
    assert figure["test-sentence/gcnn-deep"]["paper"] == 108.7


@pytest.mark.ci  # reads the quick runs
def test_ptb_sentence_anneals_every_model_over_its_planned_steps(quick_runs):
    for key in ("gcnn", "gcnn-deep", "lstm"):
        # the quick run anneals over its 4 steps: the last step's rate is the final fraction of Adam's 2e-3
        anneal = quick_runs[1]["ptb-sentence"]["units"][key]["anneal"]
        assert anneal["initial_learning_rate"] == pytest.approx(2e-3) and anneal["over"] == "4 steps"
        assert anneal["last_learning_rate"] == pytest.approx(2e-3 * ptb_sentence.PTB_FINAL_FRACTION)
    with pytest.raises(ValueError, match="not of ptb-sentence"):
        reproduce.reproduce("ptb-sentence", out="/nonexistent/never-written", minutes=3, log=lambda *a: None)


@pytest.mark.ci  # reads the quick runs
def test_quick_table7_records_balance_statistics(quick_runs):
    _, results = quick_runs
    figure = {f["id"]: f for f in results["table7"]["figures"]}
    for n in (4, 32, 256):
        for stat in ("cv_importance", "cv_load", "max_load_ratio"):
            assert figure[f"{stat}/moe-{n}"]["ours"] is not None and figure[f"{stat}/moe-{n}"]["ours"] >= 0
    assert figure["max_load_ratio/moe-256"]["ours"] >= 1.0
    assert set(results["table7"]["trend"]) == {"falls_with_experts", "every_moe_beats_dense"}
