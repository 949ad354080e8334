"""python -m zoo.tools.reproduce.moe_en: the runs it trains differ only where the comparison says
(the preset, the experts), each finished run is skipped and a cut one resumed by the same command,
and a bad variant is refused before anything runs."""

import json
import os

import pytest

from zoo.tools.reproduce import moe_en


def test_every_run_has_the_same_steps_data_order_and_flags_but_the_model():
    dense = moe_en.variant_command("dense", 1, "corpora/en", "runs/dense-s1")
    moe = moe_en.variant_command("moe-16", 1, "corpora/en", "runs/moe-16-s1")
    assert dense[:4] == ["zoo", "train", "--preset", "gcnn-wide-en"] and moe[:4] == ["zoo", "train", "--preset", "gcnn-moe-en"]
    flags = lambda c: [w for w in c[4:] if not w.startswith("runs/")]  # noqa: E731
    assert flags(moe)[:-2] == flags(dense) and moe[-2] == "--set"
    assert json.loads(moe[-1].split("=", 1)[1]) == {"after_blocks": [3], "num_experts": 16, "k": 2, "hidden_units": 512}
    for flag, value in (("--steps", "3000"), ("--seed", "1"), ("--steps-per-epoch", "500")):
        assert dense[dense.index(flag) + 1] == value
    with pytest.raises(ValueError, match="Unknown variant 'moe-x'; expected dense or moe-N"):
        moe_en.variant_command("moe-x", 0, "c", "o")


def test_finished_runs_are_skipped_and_the_others_started_or_resumed(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    (runs / "dense-s0" / "final").mkdir(parents=True)
    (runs / "dense-s0" / "final" / "config.json").write_text("{}")
    (runs / "moe-64-s0" / "checkpoints").mkdir(parents=True)  # cut short: resumed by zoo train
    started = []
    monkeypatch.setattr(moe_en.subprocess, "run", lambda command, **kwargs: started.append(command))
    moe_en.train("corpus", str(runs), ["dense", "moe-64"], [0, 1])
    assert [c[c.index("--out") + 1] for c in started] == [os.path.join(str(runs), n)
                                                          for n in ("moe-64-s0", "dense-s1", "moe-64-s1")]
    with pytest.raises(SystemExit):
        moe_en.main(["train", "--corpus", "c", "--variants", "dense,moe-two"])


def test_a_runs_figures_are_scored_once_and_again_when_its_kept_weights_change(tmp_path, monkeypatch):
    run = tmp_path / "moe-4-s0"
    (run / "best").mkdir(parents=True)
    weights = run / "best" / "model.weights.h5"
    weights.write_bytes(b"w")
    scored = []
    monkeypatch.setattr(moe_en, "_score_run", lambda *args: scored.append(args) or {"n": len(scored)})
    assert moe_en._run_figures(str(run), "c", "moe-4", 0) == {"n": 1}
    assert moe_en._run_figures(str(run), "c", "moe-4", 0) == {"n": 1} and len(scored) == 1
    later = os.path.getmtime(run / moe_en.FIGURES_FILE) + 10
    os.utime(weights, (later, later))
    assert moe_en._run_figures(str(run), "c", "moe-4", 0) == {"n": 2}


def test_the_plot_draws_the_curves_the_gain_and_the_trend_over_the_experts(tmp_path):
    curve = [{"step": 500, "val_perplexity": 600.0}, {"step": 1000, "val_perplexity": 500.0}]
    units = {v: {"label": v, "test_per_word": tests, "seeds": {"0": {"curve": curve}, "1": {"curve": curve}},
                 "gain_curve": {} if v == "dense" else {"0": [{"tokens": 1e6, "gain": 0.01}]}}
             for v, tests in (("dense", [420.0, 424.0]), ("moe-4", [419.0, 421.0]), ("moe-64", [415.0, 418.0]))}
    path = tmp_path / "moe-en.png"
    moe_en.plot({"units": units}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_steps_reach_every_run_and_runs_of_different_lengths_are_not_recorded_together(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(moe_en.subprocess, "run", lambda command, **kwargs: started.append(command))
    moe_en.main(["train", "--corpus", "c", "--runs", str(tmp_path / "long"), "--variants", "dense,moe-4", "--seeds", "0",
                 "--steps", "10000"])
    assert [c[c.index("--steps") + 1] for c in started] == ["10000", "10000"]
    with pytest.raises(SystemExit):  # fewer steps than one validation
        moe_en.main(["train", "--corpus", "c", "--variants", "dense", "--steps", "100"])
    runs = tmp_path / "mixed"
    for name, steps in (("dense-s0", 3000), ("moe-4-s0", 10000)):
        (runs / name / "final").mkdir(parents=True)
        (runs / name / "final" / "config.json").write_text("{}")
    monkeypatch.setattr(moe_en, "_run_figures", lambda run, *a: {"steps": 3000 if "dense" in run else 10000})
    with pytest.raises(ValueError, match=r"different steps \(3000, 10000\); keep one step count per runs directory"):
        moe_en.record("c", str(runs), str(tmp_path / "out.json"))
