"""figure6 (experiments/figure6.py): the sweep trains before the run it chooses, at its best rate,
and the no-clip variant trains without clipping; on made-up curves."""

import pytest

from tests.reproduce_checks import fake_record, run_with_fake_training
from zoo.tools import reproduce
from zoo.tools.reproduce import curves
from zoo.tools.reproduce.experiments import figure6


def test_figure6_trains_without_weight_norm_at_the_sweeps_best_rate():
    from zoo.optimizers import PAPER_RECIPE

    v = figure6.FIGURE6.settings()["variants"]
    done = {"sweep-1": {"final_val_perplexity": None, "overrides": v["sweep-1"]["overrides"]},  # diverged
            "sweep-0.1": {"final_val_perplexity": 310.0, "overrides": v["sweep-0.1"]["overrides"]},
            "sweep-0.01": {"final_val_perplexity": 420.0, "overrides": v["sweep-0.01"]["overrides"]}}
    chosen = figure6.FIGURE6.resolve("no-wn", v["no-wn"], done)
    assert chosen["overrides"]["optimizer"] == dict(PAPER_RECIPE, learning_rate=0.1)
    assert chosen["overrides"]["weight_norm"] is False and "0.1" in chosen["label"]
    assert figure6.FIGURE6.resolve("paper", v["paper"], done) is v["paper"]


def test_figure6_trains_the_sweep_before_the_run_it_chooses(monkeypatch, tmp_path):
    calls = []
    finals = {"paper": 140.0, "no-clip": 180.0, "sweep-1": None, "sweep-0.1": 250.0, "sweep-0.01": 300.0,
              "no-wn": 240.0}
    result = run_with_fake_training(monkeypatch, tmp_path, "figure6", finals, calls)
    assert [k for k, _ in calls] == ["paper", "no-clip", "sweep-1", "sweep-0.1", "sweep-0.01", "no-wn"]
    assert calls[-1][1]["overrides"]["optimizer"]["learning_rate"] == 0.1
    assert result["units"]["no-wn"]["overrides"]["optimizer"]["learning_rate"] == 0.1
    assert "the same." in result["notes"][-2]

    # interrupted after the sweep: the rerun trains no-wn only, with the saved sweep's choice
    partial = tmp_path / "again"
    calls2 = []

    def interrupted(exp_name, key, variant, settings, run_dir, log):
        if key == "no-wn":
            raise KeyboardInterrupt
        return fake_record(variant["label"], finals[key] or 500.0,
                           diverged={"step": 3, "seconds": 1.0, "message": "nan"} if finals[key] is None else None)

    monkeypatch.setattr(curves, "train_curve", interrupted)
    monkeypatch.setenv("ZOO_REPRODUCE_RUNS", str(partial / "runs"))
    with pytest.raises(KeyboardInterrupt):
        reproduce.reproduce("figure6", out=str(partial / "results"), log=lambda *a: None)
    result = run_with_fake_training(monkeypatch, partial, "figure6", finals, calls2)
    assert [k for k, _ in calls2] == ["no-wn"]
    assert calls2[0][1]["overrides"]["optimizer"]["learning_rate"] == 0.1
    assert len(result["sessions"]) == 2


def test_figure6_no_clip_variant_trains_without_clipping_and_the_paper_run_with_it():
    from zoo.optimizers import from_config
    from zoo.tools.reproduce.experiments.figure6 import figure6_variants

    variants = figure6_variants(quick=False)
    assert from_config(variants["no-clip"]["overrides"]["optimizer"]).global_clipnorm is None
    assert from_config(variants["paper"]["overrides"]["optimizer"]).global_clipnorm == pytest.approx(0.1)
