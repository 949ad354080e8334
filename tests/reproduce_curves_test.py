"""The training-curve experiments of `zoo reproduce` (tools/reproduce/curves.py and their modules in
tools/reproduce/experiments/): figure3, figure5, figure6, ptb-sentence, table7, ptb-recipe, figure3-deep,
depth-sweep, table7-en and figure5-deep. Their --quick runs train tiny models on the treebank's first
lines (the CI smoke test of each); the orderings, the sweep and the resume logic are checked on
made-up curves, without training."""

import json
import math
import os

import numpy as np
import pytest

import zoo
from zoo.tools import cli, reproduce
from zoo.tools.reproduce import curves
from zoo.tools.reproduce.experiments import figure6, ptb_sentence

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
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


def test_each_ptb_recipe_variant_changes_one_thing_from_the_one_it_names():
    variants = reproduce.experiment("ptb-recipe").settings()["variants"]
    for key, variant in variants.items():
        if variant["before"] is None:
            continue
        before = variants[variant["before"]]
        a, b = before["overrides"], variant["overrides"]
        changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        changed |= {field for field in ("epochs", "preset", "anneal", "train") if before.get(field) != variant.get(field)}
        assert len(changed) == 1, (key, changed)
    # weight averaging is the preset's optimiser keeping a moving average, nothing else
    averaged = variants["tied-deep8-ema-20"]["overrides"]["optimizer"]
    from zoo.registry import get_preset

    assert averaged == dict(get_preset("gcnn-ptb").config["optimizer"], use_ema=True, ema_momentum=0.999)


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


def fake_record(label, final, steps=100, diverged=None, **extra):
    curve = [{"step": s, "seconds": s * 0.5, "val_perplexity": p, "train_perplexity": p * 1.1, **extra}
             for s, p in ((steps // 2, final * 1.5), (steps, final))]
    return {"label": label, "params": 1000, "curve": curve[: 1 if diverged else 2], "steps": steps,
            "seconds": steps * 0.5, "tokens_per_second": 4096.0, "best_val_perplexity": final * (1.5 if diverged else 1),
            "final_val_perplexity": None if diverged else final, "diverged": diverged, "run_dir": None,
            "planned_steps": None, "log_tail": []}


def run_with_fake_training(monkeypatch, tmp_path, name, finals, calls=None):
    """`zoo reproduce NAME` (full settings) with each variant's training replaced by a made-up
    record whose final validation perplexity is `finals[key]` (None: diverged)."""
    def fake(exp_name, key, variant, settings, run_dir, log):
        if calls is not None:
            calls.append((key, variant))
        final = finals[key]
        return fake_record(variant["label"], final or 500.0,
                           diverged={"step": 51, "seconds": 25.0, "message": "nan"} if final is None else None)

    monkeypatch.setattr(curves, "train_curve", fake)
    monkeypatch.setenv("ZOO_REPRODUCE_RUNS", str(tmp_path / "runs"))
    return reproduce.reproduce(name, out=str(tmp_path / "results"), log=lambda *a: None)


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


@pytest.mark.ci  # three short training runs
def test_annealing_changes_training_and_a_final_fraction_of_1_does_not(tmp_path):
    settings = ptb_sentence.PTB_SENTENCE.settings(quick=True)
    final = {}
    for anneal in (None, 1.0, 0.0):
        variant = dict(settings["variants"]["gcnn"], anneal=anneal)
        unit = curves.train_curve("t", "gcnn", variant, settings, str(tmp_path / "run"), lambda *a: None)
        final[anneal] = unit["final_val_perplexity"]
    assert final[1.0] == final[None]
    assert abs(final[0.0] / final[None] - 1) > 1e-4


@pytest.mark.ci  # reads the quick runs
def test_quick_table7_records_balance_statistics(quick_runs):
    _, results = quick_runs
    figure = {f["id"]: f for f in results["table7"]["figures"]}
    for n in (4, 32, 256):
        for stat in ("cv_importance", "cv_load", "max_load_ratio"):
            assert figure[f"{stat}/moe-{n}"]["ours"] is not None and figure[f"{stat}/moe-{n}"]["ours"] >= 0
    assert figure["max_load_ratio/moe-256"]["ours"] >= 1.0
    assert set(results["table7"]["trend"]) == {"falls_with_experts", "every_moe_beats_dense"}


def test_save_float16_halves_the_file_and_loads_back(tmp_path):
    model = zoo.load("gcnn-ptb", weights="random", embedding_dim=8, blocks=[[[4, 8]]], vocabulary_size=50)
    full = str(tmp_path / "m.weights.h5")
    model.save_weights(full)
    half = zoo.weights.save_float16(full, str(tmp_path / "h.weights.h5"))
    back = zoo.load("gcnn-ptb", weights=half, embedding_dim=8, blocks=[[[4, 8]]], vocabulary_size=50)
    for a, b in zip(model.get_weights(), back.get_weights(), strict=True):
        assert b.dtype == np.float32
        np.testing.assert_array_equal(b, a.astype(np.float16).astype(np.float32))


def test_results_md_gathers_runs_with_other_budgets_from_subfolders(monkeypatch, tmp_path):
    finals = {"glu": 150.0, "relu": 160.0, "gtu": 200.0, "tanh": 210.0}
    run_with_fake_training(monkeypatch, tmp_path, "figure3", finals)
    monkeypatch.setattr(curves, "train_curve", lambda name, key, variant, settings, run_dir, log:
                        fake_record(variant["label"], finals[key] - 10))
    long = reproduce.reproduce("figure3", out=str(tmp_path / "results" / "long"), minutes=7, log=lambda *a: None)
    assert long["command"] == f"zoo reproduce figure3 --out {tmp_path / 'results' / 'long'} --minutes 7"
    assert all(v["minutes"] == 7 for v in long["settings"]["variants"].values())
    path = reproduce.write_results(str(tmp_path / "results"), log=lambda *a: None)
    text = open(path).read()
    assert text.count("## figure3") == 2 and "## figure3 (in results/long/):" in text
    assert "| GLU: validation perplexity after 7 min | — | 140.0 |" in text
    assert "[figure3.png](results/long/figure3.png)" in text and "[figure3.png](results/figure3.png)" in text
    with pytest.raises(ValueError, match="not of table4"):
        reproduce.reproduce("table4", out=str(tmp_path / "t4"), minutes=3, log=lambda *a: None)


def test_figure6_no_clip_variant_trains_without_clipping_and_the_paper_run_with_it():
    from zoo.optimizers import from_config
    from zoo.tools.reproduce.experiments.figure6 import figure6_variants

    variants = figure6_variants(quick=False)
    assert from_config(variants["no-clip"]["overrides"]["optimizer"]).global_clipnorm is None
    assert from_config(variants["paper"]["overrides"]["optimizer"]).global_clipnorm == pytest.approx(0.1)
