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
def test_quick_run_measures_every_unit_and_derives_the_reductions_at_each_budget(quick_run):
    out, result = quick_run
    settings = result["settings"]
    assert settings["report_minutes"] == [0.02, 0.05]
    assert list(result["units"]) == [f"{d}/{a}" for d in finetune.DOMAINS for a in finetune.ARMS]
    figures = {f["id"]: f["ours"] for f in result["figures"]}
    for domain in finetune.DOMAINS:
        units = {a: result["units"][f"{domain}/{a}"] for a in finetune.ARMS}
        zero = units["zero-shot"]
        # the fine-tuned run starts near zero-shot: the same weights, new pieces initialised from
        # the ones they replace (the made-up text is mostly new pieces, so not exactly)
        assert units["extended"]["curve"][0]["val_perplexity"] == pytest.approx(zero["final_val_perplexity"], rel=0.05)
        assert zero["vocabulary"] == 16_000 and units["scratch"]["vocabulary"] < 16_000
        assert 16_000 < units["extended"]["vocabulary"] <= 16_040
        # the fine-tuned arm fits with the preset's fine-tuning optimizer, scratch with its own
        assert units["extended"]["optimizer"] == settings["fine_tune_optimizer"]
        assert units["scratch"]["optimizer"] == zoo.registry.get_preset("gcnn-en").config["optimizer"]
        assert settings["fine_tune_optimizer"] == zoo.registry.fine_tune_optimizer("gcnn-en")
        assert figures[f"{domain}/zero-shot/test"] == zero["curve"][0]["test_perplexity"] > 1
        for arm in ("extended", "scratch"):
            curve = units[arm]["curve"]
            assert units[arm]["steps"] >= 1 and curve[-1]["step"] == units[arm]["steps"]
            assert units[arm]["final_val_perplexity"] == curve[-1]["val_perplexity"]
            assert all(math.isfinite(c["val_perplexity"]) for c in curve)
            assert units[arm]["test_words"] == zero["test_words"] > 0
            assert 200 <= units[arm]["first_test_words"] == zero["first_test_words"] < zero["test_words"]
            # one validation where training time crossed each budget, the last one at the end
            # (one point for both when a single step crossed both)
            assert [m for c in curve for m in c.get("minutes", [])] == [0.02, 0.05]
            assert 0.05 in curve[-1]["minutes"] and curve[-1]["seconds"] >= 0.05 * 60
            marked = [c for c in curve if 0.02 in c.get("minutes", [])][0]
            assert marked["seconds"] >= 0.02 * 60 and marked["step"] <= units[arm]["steps"]
            assert figures[f"{domain}/{arm}@0.02min"] == marked["val_perplexity"]
            assert figures[f"{domain}/{arm}/pieces-per-word"] == units[arm]["pieces_per_word"]
            for minutes in (0.02, 0.05):
                point = finetune.at(units[arm], minutes)
                # the kept weights are those of the lowest validation up to the budget, and only
                # marked validations score the test text
                upto = curve[:curve.index(point) + 1]
                lowest = min(upto, key=lambda c: c["val_perplexity"])
                assert point["kept_step"] == lowest["step"]
                assert figures[f"{domain}/{arm}/kept-test@{minutes:g}min"] == point["kept_test_perplexity"] > 1
                assert figures[f"{domain}/{arm}/test@{minutes:g}min"] == point["test_perplexity"]
                if lowest is point:  # kept = the weights of that moment: the same test score
                    assert point["kept_test_perplexity"] == point["test_perplexity"]
                # the test text's first words, scored with the kept weights too: another figure
                assert figures[f"{domain}/{arm}/kept-test-first@{minutes:g}min"] == \
                    point["kept_first_test_perplexity"] != point["kept_test_perplexity"]
            assert all("test_perplexity" not in c for c in curve if "minutes" not in c)
        # every word is at least one piece; the extended tokenizer never splits the text finer
        ppw = {a: units[a]["pieces_per_word"] for a in finetune.ARMS}
        assert 1.0 <= ppw["extended"] <= ppw["zero-shot"] and ppw["scratch"] >= 1.0
        for minutes in (0.02, 0.05):
            scratch = finetune.at(units["scratch"], minutes)
            want = 1 - finetune.at(units["extended"], minutes)["val_perplexity"] / scratch["val_perplexity"]
            assert figures[f"{domain}/reduction-extended@{minutes:g}min"] == pytest.approx(want)
            kept = 1 - finetune.at(units["extended"], minutes)["kept_test_perplexity"] / scratch["kept_test_perplexity"]
            assert figures[f"{domain}/reduction-extended/kept-test@{minutes:g}min"] == pytest.approx(kept)
            first = 1 - (finetune.at(units["extended"], minutes)["kept_first_test_perplexity"]
                         / scratch["kept_first_test_perplexity"])
            assert figures[f"{domain}/reduction-extended/kept-test-first@{minutes:g}min"] == pytest.approx(first)
        assert figures[f"{domain}/zero-shot/test-first"] == zero["curve"][0]["kept_first_test_perplexity"] > 1
        assert any(note.startswith(f"{domain} (per word): zero-shot") and "with the weights kept within 0.05 minutes"
                   in note for note in result["notes"])
    with open(os.path.join(out, "finetune.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE


def test_the_kept_weights_are_scored_where_the_validation_was_lowest_and_put_back():
    """The callback keeps the weights of the lowest validation so far, scores the test text with
    them at a budget's crossing, and leaves the model with its own weights afterwards."""

    class Model:
        def __init__(self):
            self.w = [1.0]

        def get_weights(self):
            return list(self.w)

        def set_weights(self, w):
            self.w = list(w)

        def perplexity(self, lines, per):
            return {"valid": {1.0: 50.0, 2.0: 30.0, 3.0: 40.0}, "test": {1.0: 500.0, 2.0: 300.0, 3.0: 400.0},
                    "first": {1.0: 5.0, 2.0: 3.0, 3.0: 4.0}}[lines[0]][self.w[0]]

    timer = finetune.TimedValidation(["valid"], 1.0, 30, lambda line: None, marks=[0.5], test=["test"],
                                     first=["first"])
    model = Model()
    for w, seconds, marks in ((1.0, 0.0, ()), (2.0, 20.0, ()), (3.0, 30.0, (0.5,))):
        model.w = [w]
        timer.steps = int(seconds)
        timer.validate(model, seconds, marks=marks)
    point = timer.curve[-1]
    assert point["kept_step"] == 20 and point["kept_test_perplexity"] == 300.0 and point["test_perplexity"] == 400.0
    assert point["kept_first_test_perplexity"] == 3.0  # the kept weights, on the test text's first words
    # a split no longer than its first words (the same list): its figure, not scored again
    test = ["test"]
    again = finetune.TimedValidation(["valid"], 1.0, 30, lambda line: None, marks=[0.5], test=test, first=test)
    scored = []
    model.perplexity = lambda lines, per, score=model.perplexity: scored.append(lines[0]) or score(lines, per)
    for w, seconds, marks in ((2.0, 0.0, ()), (3.0, 30.0, (0.5,))):
        model.w = [w]
        again.validate(model, seconds, marks=marks)
    assert again.curve[-1]["kept_first_test_perplexity"] == again.curve[-1]["kept_test_perplexity"] == 300.0
    assert scored == ["valid", "valid", "test", "test"]  # now and kept, once each
    assert model.w == [3.0]  # the run goes on from its own weights
    assert "test_perplexity" not in timer.curve[1]


def test_the_full_run_scores_the_whole_test_split_and_its_first_words():
    settings = finetune.settings()
    assert settings["test_words"] is None and settings["first_test_words"] == finetune.FIRST_TEST_WORDS
    lines = [f"w{i} x y" for i in range(10)]
    assert finetune.first_words(lines, None) == lines and finetune.first_words(lines, 7) == lines[:3]
    assert finetune.test_text(settings) == "the whole test split"
    assert finetune.test_text(dict(settings, test_words=20_000)) == "the first ~20,000 words of the test split"


def test_the_record_of_the_first_test_words_keeps_its_figures_and_says_what_it_scored():
    """The shipped record made before the whole split was scored (settings["test_words"] 20,000,
    no first_test_words): its kept-weights figures, no first-words ones, its test text named."""
    import json

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    path = os.path.join(root, "results", "finetune-first-test-words", "finetune.json")
    with open(path) as f:
        record = json.load(f)
    settings, units = record["settings"], record["units"]
    assert settings["test_words"] == 20_000 and "first_test_words" not in settings
    ids = {f["id"]: f["ours"] for f in finetune.figures(settings, units)}
    assert not any("test-first" in i for i in ids)
    assert ids["shakespeare/reduction-extended/kept-test@4min"] == pytest.approx(1 - 869.0 / 996.4, abs=1e-4)
    notes = finetune.extras(settings, units)["notes"]
    assert any(n.startswith("Test: the first ~20,000 words of the test split of each held-out source") for n in notes)


def test_records_before_the_budgets_keep_their_arms_and_figure_names():
    """A record without settings["arms"] (the shipped 4-minute one) is read as it was measured:
    four arms (five with `extend_ids`) and figures at its one budget under their old ids."""
    legacy = {"domains": ["shakespeare"], "minutes": 4.0, "quick": False}
    assert finetune.arms(legacy) == finetune.LEGACY_ARMS
    assert finetune.arms(dict(legacy, extend_ids=4000)) == finetune.LEGACY_ARMS + ("extended",)
    curve = lambda *ppl: [{"step": 10 * i, "seconds": 30.0 * i, "val_perplexity": p} for i, p in enumerate(ppl)]
    units = {"shakespeare/zero-shot": {"arm": "zero-shot", "curve": curve(900.0), "final_val_perplexity": 900.0},
             "shakespeare/pretrained": {"arm": "pretrained", "curve": curve(900.0, 300.0), "final_val_perplexity": 300.0},
             "shakespeare/scratch": {"arm": "scratch", "curve": curve(5e4, 600.0), "final_val_perplexity": 600.0},
             "shakespeare/scratch-shared": {"arm": "scratch-shared", "curve": curve(5e4, 400.0),
                                            "final_val_perplexity": 400.0}}
    figures = {f["id"]: f["ours"] for f in finetune.figures(legacy, units)}
    assert figures["shakespeare/reduction"] == pytest.approx(0.5)
    assert figures["shakespeare/reduction-shared"] == pytest.approx(0.25)
    assert figures["shakespeare/pretrained"] == 300.0 and figures["shakespeare/zero-shot"] == 900.0


def test_the_best_within_a_budget_ignores_later_validations():
    """A run that overfits (the GNU manuals: 258k training words) reads its lowest validation up to
    the budget's crossing, never one after it."""
    curve = [{"step": 0, "seconds": 0.0, "val_perplexity": 900.0}, {"step": 5, "seconds": 60.0, "val_perplexity": 300.0},
             {"step": 9, "seconds": 240.5, "val_perplexity": 400.0, "minutes": [4.0]},
             {"step": 12, "seconds": 300.0, "val_perplexity": 200.0},
             {"step": 20, "seconds": 600.1, "val_perplexity": 800.0, "minutes": [10.0]}]
    unit = {"domain": "gnu-info", "arm": "scratch", "curve": curve}
    assert finetune.best(unit, 4.0) == 300.0 and finetune.best(unit, 10.0) == 200.0
    settings = dict(finetune.settings(), domains=["gnu-info"])
    units = {f"gnu-info/{a}": dict(unit, arm=a, final_val_perplexity=800.0) for a in finetune.ARMS}
    units["gnu-info/extended"] = dict(unit, arm="extended", curve=[dict(c, val_perplexity=c["val_perplexity"] / 2)
                                                                   for c in curve])
    figures = {f["id"]: f["ours"] for f in finetune.figures(settings, units)}
    assert figures["gnu-info/extended/best@4min"] == 150.0
    assert figures["gnu-info/reduction-extended/best@10min"] == pytest.approx(0.5)
    assert figures["gnu-info/reduction-extended@10min"] == pytest.approx(0.5)


def test_the_equal_steps_control_reads_each_fine_tuned_run_within_the_steps_scratch_made():
    """Where a fine-tuned run's minutes held more steps than scratch's (a quieter machine), the
    control compares its last validation within scratch's step count at each budget."""
    point = lambda step, seconds, ppl, *marks: dict({"step": step, "seconds": seconds, "val_perplexity": ppl},
                                                   **({"minutes": list(marks)} if marks else {}))
    scratch = [point(0, 0.0, 900.0), point(9, 240.0, 600.0, 4.0), point(20, 600.0, 500.0, 10.0)]
    tuned = [point(0, 0.0, 900.0), point(6, 120.0, 450.0), point(11, 240.0, 300.0, 4.0), point(25, 600.0, 200.0, 10.0)]
    settings = dict(finetune.settings(), domains=["python-docs"], arms=["zero-shot", "pretrained", "extended", "scratch"])
    units = {"python-docs/zero-shot": {"arm": "zero-shot", "curve": [point(0, 0.0, 900.0)], "final_val_perplexity": 900.0},
             "python-docs/scratch": {"arm": "scratch", "curve": scratch, "final_val_perplexity": 500.0}}
    for arm in ("pretrained", "extended"):
        units[f"python-docs/{arm}"] = {"arm": arm, "curve": tuned, "final_val_perplexity": 200.0}
    assert finetune.at_steps(units["python-docs/extended"], 9, 4.0) == tuned[1]
    # never past the budget, where the fine-tuned run made fewer steps than scratch
    assert finetune.at_steps(units["python-docs/extended"], 21, 4.0) == tuned[2]
    figures = {f["id"]: f for f in finetune.figures(settings, units)}
    assert figures["python-docs/reduction-extended@4min"]["ours"] == pytest.approx(0.5)  # at equal minutes
    control = figures["python-docs/reduction-extended/equal-steps@4min"]
    assert control["ours"] == pytest.approx(0.25) and control["steps"] == 6  # 450 at step 6 against 600 at step 9
    assert figures["python-docs/reduction/equal-steps@10min"]["ours"] == pytest.approx(1 - 300.0 / 500.0)
    notes = finetune.extras(settings, units)["notes"]
    assert "extended 50.0% lower than scratch (meets the 30% target), 25.0% at step 6 (within scratch's 9 steps)" in notes[0]


def test_a_run_without_a_validation_at_a_budget_is_not_read_as_another():
    unit = {"domain": "fortunes", "arm": "scratch", "curve": [{"step": 5, "seconds": 250.0, "val_perplexity": 9.0,
                                                                "minutes": [4.0]}]}
    assert finetune.at(unit, 4.0)["val_perplexity"] == 9.0
    with pytest.raises(KeyError, match="fortunes/scratch run has no validation at 10 minutes"):
        finetune.at(unit, 10.0)


def test_the_budgets_are_four_and_ten_minutes_by_default():
    assert finetune.settings()["minutes"] == 10.0 and finetune.settings()["report_minutes"] == [4.0, 10.0]
    assert finetune.settings(minutes=4)["report_minutes"] == [4.0]
    assert finetune.settings(minutes=20)["report_minutes"] == [4.0, 10.0, 20.0]


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
