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


@pytest.mark.parametrize("variant", ["dense", "moe-64"])
def test_a_run_of_other_steps_decays_its_learning_rate_over_its_own_steps(variant):
    """The presets' cosine schedule spans the shipped model's 10,000 steps: a 3,000-step run (the
    default, the experts study) sets its own (runs before c6e2875 did not, and spent their last
    steps at the final rate)."""
    assert "optimizer=" not in " ".join(moe_en.variant_command(variant, 0, "c", "o", steps=10_000))
    command = moe_en.variant_command(variant, 0, "c", "o")
    (schedule,) = [json.loads(w.split("=", 1)[1]) for w in command if w.startswith("optimizer=")]
    assert schedule == {"name": "adam", "learning_rate": 0.002, "global_clipnorm": 1.0, "decay_steps": 3_000,
                        "final_fraction": 0.05}
    assert command[-1].startswith("optimizer=" if variant == "dense" else "moe=")  # the mixture's override last


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


def test_record_keeps_an_earlier_records_seeds_whose_runs_are_gone_and_names_them(tmp_path, monkeypatch):
    def figures(variant, seed, per_word):
        curve = [{"step": 500, "val_perplexity": 900.0 + seed, "val_perplexity_per_token": 150.0,
                  "train_perplexity_per_token": 120.0}]
        out = {"params": 10, "steps": 500, "curve": curve, "test": {"per_word": per_word}}
        if variant != "dense":
            out.update(tokens_per_expert_per_step=64.0, tokens_per_expert=32000.0,
                       balance={"moe": {"per_window": {"cv_importance": 0.1}}})
        return out

    out = tmp_path / "moe-en-10k.json"
    earlier = {"units": {"dense": {"seeds": {"0": figures("dense", 0, 400.0)}},
                         "moe-64": {"seeds": {"0": figures("moe-64", 0, 380.0)}}}}
    out.write_text(json.dumps(earlier))
    runs = tmp_path / "runs"
    for name in ("dense-s1", "moe-64-s1"):  # the second seed, on a new machine; the first's directories are gone
        (runs / name / "final").mkdir(parents=True)
        (runs / name / "final" / "config.json").write_text("{}")
    monkeypatch.setattr(moe_en, "_run_figures", lambda run, corpus, variant, seed:
                        figures(variant, seed, {"dense": 410.0, "moe-64": 369.0}[variant]))
    monkeypatch.setattr(moe_en, "plot", lambda result, path: None)
    with pytest.raises(ValueError):  # without the flag: the directory's runs alone, as before
        moe_en.record("c", str(tmp_path / "nothing"), str(out))
    result = moe_en.record("c", str(runs), str(out), keep_earlier=True)
    assert result["units"]["dense"]["test_per_word"] == [400.0, 410.0]
    assert result["units"]["moe-64"]["gain_over_dense"] == [1 - 380 / 400, 1 - 369 / 410]
    assert result["notes"][-1] == f"Kept from the earlier record (their run directories no longer in runs): " \
                                  "dense-s0, moe-64-s0."
    gap = next(f for f in result["figures"] if f["id"] == "gap/dense")
    assert gap["ours"] == 150.0 / 120.0
    fresh = moe_en.record("c", str(runs), str(tmp_path / "fresh.json"))  # no flag: seed 1 alone
    assert fresh["units"]["dense"]["test_per_word"] == [410.0] and "Kept" not in fresh["notes"][-1]
    with pytest.raises(ValueError, match="no earlier record at"):
        moe_en.record("c", str(runs), str(tmp_path / "none.json"), keep_earlier=True)


def test_the_record_names_the_runs_schedule_and_refuses_runs_of_different_schedules(tmp_path, monkeypatch):
    def run(runs, name, decay):
        (runs / name / "final").mkdir(parents=True)
        optimizer = {"name": "adam", "learning_rate": 0.002, "decay_steps": decay, "final_fraction": 0.05}
        (runs / name / "final" / "config.json").write_text(json.dumps({"config": {"optimizer": optimizer}}))

    curve = [{"step": 10000, "val_perplexity": 400.0}]
    monkeypatch.setattr(moe_en, "_run_figures", lambda *a: {"params": 1, "steps": 10000, "curve": curve,
                                                            "test": {"per_word": 400.0}})
    monkeypatch.setattr(moe_en, "plot", lambda result, path: None)
    for name, decay in (("dense-s0", 3000), ("dense-s1", 3000)):  # the presets' schedule, stretched over nothing
        run(tmp_path / "short", name, decay)
    result = moe_en.record("c", str(tmp_path / "short"), str(tmp_path / "short.json"))
    assert "with the learning rate's cosine decay over 3,000 steps (then 5% of it for the last 7,000)" \
        in result["description"]
    assert (result["settings"]["decay_steps"], result["settings"]["final_fraction"]) == (3000, 0.05)
    assert result["units"]["dense"]["seeds"][0]["schedule"] == [3000, 0.05]
    assert "gcnn-en's network, corpus and tokenizer" in result["description"]  # no corpus.json: the whole corpus
    quarter = tmp_path / "en-quarter"  # a corpus of `corpora english --train-fraction 0.25`
    quarter.mkdir()
    (quarter / "corpus.json").write_text(json.dumps({"train_fraction": 0.25, "training_words": {"train": 1148438}}))
    result = moe_en.record(str(quarter), str(tmp_path / "short"), str(tmp_path / "quarter.json"))
    assert "gcnn-en's network and tokenizer settings on 25% of its corpus's training documents (1,148,438 words; " \
           "validation and test unchanged), 10,000 steps" in result["description"]
    assert (result["settings"]["train_fraction"], result["settings"]["training_words"]) == (0.25, 1148438)
    assert "--corpus corpora/en-quarter --runs runs/short --out" in result["command"]  # no machine's own path
    run(tmp_path / "mixed", "dense-s0", 3000)
    run(tmp_path / "mixed", "dense-s1", 10000)
    with pytest.raises(ValueError, match=r"different steps \(10000, 3000\); keep one schedule per runs directory"):
        moe_en.record("c", str(tmp_path / "mixed"), str(tmp_path / "mixed.json"))
