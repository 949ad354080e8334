"""figure3, figure5, figure3-deep, depth-sweep and figure5-deep (experiments/gating.py): the variants
match the GLU model's parameters, and the orderings and gaps are read off made-up curves."""

import math

import pytest

import zoo
from tests.reproduce_checks import PNG_SIGNATURE, run_with_fake_training
from zoo.tools import reproduce


@pytest.mark.parametrize("name", ["figure3", "figure5"])
def test_gating_variants_keep_the_glu_models_parameter_count_within_1_percent(name):
    variants = reproduce.experiment(name).settings()["variants"]
    glu = zoo.count_params("gcnn-ptb")
    assert zoo.count_params("gcnn-ptb", **variants["glu"]["overrides"]) == glu  # GLU is the preset itself
    for key, variant in variants.items():
        n = zoo.count_params(variant["preset"], **variant["overrides"])
        assert abs(n / glu - 1) <= 0.01, (key, n, glu)  # as the experiments' descriptions say


@pytest.mark.ci
@pytest.mark.parametrize("name", ["figure3-deep", "depth-sweep", "figure5-deep"])
def test_deep_gating_variants_match_parameters_at_each_depth_and_see_30_tokens(name):
    variants = reproduce.experiment(name).settings()["variants"]
    for key, variant in variants.items():
        glu = zoo.count_params("gcnn-ptb", **dict(variant["overrides"], activation="glu", blocks=[[[5, 128]]] * variant["depth"]))
        n = zoo.count_params(variant["preset"], **variant["overrides"])
        assert abs(n / glu - 1) <= 0.005, (key, n, glu)
        model = zoo.load(variant["preset"], weights="random", **variant["overrides"])
        assert len(model.blocks) == variant["depth"] and model.receptive_field == 1 + 4 * variant["depth"]
        assert model.activation == variant["overrides"].get("activation", "glu")


def test_depth_sweep_reports_each_gap_to_glu(monkeypatch, tmp_path):
    finals = {"glu-4": 150.0, "tanh-4": 140.0, "relu-4": 145.0, "glu-8": 140.0, "tanh-8": 154.0, "relu-8": 147.0,
              "glu-12": 150.0, "tanh-12": None, "relu-12": 165.0}
    result = run_with_fake_training(monkeypatch, tmp_path, "depth-sweep", finals)
    figs = {f["id"]: f["ours"] for f in result["figures"]}
    assert figs["gap/tanh-4"] == pytest.approx(140 / 150 - 1) and figs["gap/tanh-8"] == pytest.approx(0.1)
    assert figs["gap/relu-12"] == pytest.approx(0.1) and figs["gap/tanh-12"] is None
    assert ("Tanh's validation perplexity above GLU's after the time budget (positive: GLU lower): 4 blocks -6.7%, "
            "8 blocks +10.0%.") in result["notes"]
    # the fake runs all stop at step 100: per update, the gap is the same
    assert figs["gap-per-update/tanh-8"] == pytest.approx(0.1) and figs["gap-per-update/tanh-12"] is None
    assert "Tanh above GLU at the same update (the last validation both reached): 4 blocks -6.7% (step 100), " \
        "8 blocks +10.0% (step 100)." in result["notes"]


def test_figure3_deep_reports_each_gap_to_glu_and_the_best_along_each_run(monkeypatch, tmp_path):
    result = run_with_fake_training(monkeypatch, tmp_path, "figure3-deep",
                                    {"glu": 125.0, "gtu": 130.0, "relu": 137.5, "tanh": None})
    figs = {f["id"]: f["ours"] for f in result["figures"]}
    assert figs["gap/gtu"] == pytest.approx(0.04) and figs["gap-per-update/relu"] == pytest.approx(0.1)
    assert figs["gap/tanh"] is None and figs["gap-per-update/tanh"] is None  # diverged
    assert ("Above GLU's validation perplexity (positive: GLU lower): GTU +4.0% after the budget, +4.0% at step 100; "
            "ReLU +10.0% after the budget, +10.0% at step 100.") in result["notes"]
    # the made-up diverged run's best is its one validation, 1.5 × 500
    assert result["notes"][-1].endswith("the best along each run: GLU, 8 blocks 125.0, GTU, 8 blocks 130.0, "
                                        "ReLU, 8 blocks 137.5, Tanh, 8 blocks 750.0.")


def test_figure5_deep_sets_bilinear_and_linear_against_glu_in_the_papers_order(monkeypatch, tmp_path):
    result = run_with_fake_training(monkeypatch, tmp_path, "figure5-deep", {"glu": 125.0, "bilinear": 150.0, "linear": 137.5})
    figs = {f["id"]: f["ours"] for f in result["figures"]}
    assert figs["gap/bilinear"] == pytest.approx(0.2) and figs["gap-per-update/linear"] == pytest.approx(0.1)
    assert "gap/gtu" not in figs
    assert ("Above GLU's validation perplexity (positive: GLU lower): Bilinear +20.0% after the budget, +20.0% at "
            "step 100; Linear +10.0% after the budget, +10.0% at step 100.") in result["notes"]
    assert ("The paper's ordering (Figure 5, lowest perplexity first): GLU, 8 blocks < Bilinear, 8 blocks < Linear, "
            "8 blocks; ours differs: GLU, 8 blocks < Linear, 8 blocks < Bilinear, 8 blocks.") in result["notes"]


def test_the_gap_per_update_is_read_at_the_last_validation_both_runs_reached():
    from zoo.tools.reproduce.experiments.gating import gap_per_update

    glu = {"curve": [{"step": 100, "val_perplexity": 300.0}, {"step": 200, "val_perplexity": 200.0},
                     {"step": 300, "val_perplexity": 150.0}]}
    # a faster run: more steps in the same minutes, lower at its end, but higher than GLU at step 300
    tanh = {"curve": [{"step": 100, "val_perplexity": 280.0}, {"step": 300, "val_perplexity": 165.0},
                      {"step": 400, "val_perplexity": 140.0}, {"step": 500, "val_perplexity": 130.0}]}
    assert gap_per_update(glu, tanh) == (pytest.approx(165 / 150 - 1), 300)
    assert gap_per_update(tanh, glu) == (pytest.approx(150 / 165 - 1), 300)
    assert gap_per_update(glu, {"curve": [{"step": 50, "val_perplexity": 400.0}]}) == (None, None)
    assert gap_per_update({}, tanh) == (None, None)
    assert gap_per_update(glu, dict(tanh, diverged="loss NaN at step 600")) == (None, None)
    # a validation that was not finite is skipped: the last finite one both reached counts
    inf = {"curve": tanh["curve"][:1] + [{"step": 300, "val_perplexity": math.inf}]}
    assert gap_per_update(glu, inf) == (pytest.approx(280 / 300 - 1), 100)


def test_figure3_ordering_is_read_off_the_final_perplexities(monkeypatch, tmp_path):
    result = run_with_fake_training(monkeypatch, tmp_path, "figure3",
                                    {"glu": 150.0, "relu": 160.0, "gtu": 200.0, "tanh": 210.0})
    assert result["ordering"] == ["glu", "relu", "gtu", "tanh"]
    assert "ours is the same." in " ".join(result["notes"])
    result = run_with_fake_training(monkeypatch, tmp_path / "2", "figure3",
                                    {"glu": 170.0, "relu": 160.0, "gtu": 200.0, "tanh": None})
    assert result["ordering"] == ["relu", "glu", "gtu", "tanh"]
    notes = " ".join(result["notes"])
    assert "ours differs: ReLU < GLU < GTU < Tanh." in notes and "Tanh (diverged)" in notes
    figure = {f["id"]: f for f in result["figures"]}
    assert figure["val/tanh"]["ours"] is None and "diverged at step 51" in figure["val/tanh"]["label"]
    with open(tmp_path / "2" / "results" / "figure3.png", "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
