"""tools/benchmarks/ptb.py: `train_side_by_side` (one step per model per batch, in turn; the median
step time leaves out the first five steps; only the tracked metrics are averaged, over the last 100
steps), and `zoo benchmark ptb-softmax` and `moe-ptb` on a fake run (conftest.py): ptb-softmax's
full and adaptive gcnn-ptb from the same seed on the same batches, `--cutoffs` parsed into the
adaptive one, the speed-up and perplexity gap from the step times and perplexities; moe-ptb's
lstm-moe-ptb with its balancing losses, the same with both losses at 0 (and nothing else changed),
and the dense baseline, all from the same seed, the MoE statistics read from the tracked metrics by
suffix."""

import itertools
import json

import pytest

from zoo.registry import get_preset
from zoo.tools.benchmarks import harness, ptb

WITH, WITHOUT, DENSE = "lstm-moe-ptb, losses 0.1/0.1", "lstm-moe-ptb, losses 0/0", "lstm-wide-ptb (dense)"


class Batches:
    def __init__(self, n):
        self.items = [(f"x{i}", f"y{i}", f"w{i}") for i in range(n)]

    def take(self, steps):
        return self.items[:steps]


class Model:
    """Logs a loss and a `cv_load` that depend on the step, and records what it was given."""

    def __init__(self, name, seen):
        self.name, self.seen, self.step = name, seen, 0

    def train_on_batch(self, x, y, sample_weight=None, return_dict=False):
        assert return_dict
        self.seen.append((self.name, x, y, sample_weight))
        self.step += 1
        return {"loss": 100.0 * self.step, "moe_cv_load": float(self.step)}


def test_steps_interleave_and_the_statistics_are_exact(monkeypatch):
    # every perf_counter call is 1 s after the last: every step takes exactly 1 s...
    clock = itertools.count()
    monkeypatch.setattr(harness.time, "perf_counter", lambda: float(next(clock)))
    seen = []
    models = {"a": Model("a", seen), "b": Model("b", seen)}
    out = ptb.train_side_by_side(models, Batches(130), 120, report_every=0, track=("cv_load",))
    assert seen[:4] == [("a", "x0", "y0", "w0"), ("b", "x0", "y0", "w0"), ("b", "x1", "y1", "w1"),
                        ("a", "x1", "y1", "w1")]  # the harness's rotating order
    assert len(seen) == 240  # `steps` batches, not all 130
    for name in models:
        assert out[name]["median_step_s"] == 1.0
        # the mean of steps 21..120 (the last 100); the untracked loss is left out
        assert out[name]["metrics"] == {"moe_cv_load": pytest.approx(70.5)}


def test_the_median_leaves_out_the_first_five_steps_unless_there_are_no_more(monkeypatch):
    durations = iter([50.0] * 5 + [2.0, 3.0, 4.0] + [9.0] * 5)
    now = [0.0]

    def perf_counter():  # called twice a step: before (returns now) and after (now + duration)
        perf_counter.calls += 1
        if perf_counter.calls % 2 == 0:
            now[0] += next(durations)
        return now[0]

    perf_counter.calls = 0
    monkeypatch.setattr(harness.time, "perf_counter", perf_counter)
    out = ptb.train_side_by_side({"m": Model("m", [])}, Batches(8), 8, report_every=0)
    assert out["m"] == {"median_step_s": 3.0, "metrics": {}}
    out = ptb.train_side_by_side({"m": Model("m", [])}, Batches(3), 3, report_every=0)
    assert out["m"]["median_step_s"] == 9.0  # three steps: all of them count


def test_progress_is_reported_every_report_every_steps(monkeypatch, capsys):
    ptb.train_side_by_side({"m": Model("m", [])}, Batches(5), 5, report_every=2)
    assert capsys.readouterr().out == "  step 2/5\n  step 4/5\n"


def test_cutoffs_reach_the_adaptive_model_and_the_ratios_are_exact(fake_ptb_run, tmp_path, capsys):
    fake_ptb_run.answers = {"full": (0.3, 120.0, {}), "adaptive": (0.1, 126.0, {})}
    path = tmp_path / "out.json"
    results = ptb.ptb_softmax(["--steps", "7", "--cutoffs", "100,300", "--seed", "5", "--batch-size", "4",
                                "--seq-len", "9", "--json", str(path)])
    assert fake_ptb_run.loaded == [("gcnn-ptb", {}, 5), ("gcnn-ptb", {"cutoffs": [100, 300]}, 5)]
    assert fake_ptb_run.trained["models"] == ["full", "adaptive"] and fake_ptb_run.trained["steps"] == 7
    assert fake_ptb_run.trained["batches"] == ("batches", ("train",), "ptb vocabulary", 4, 9,
                                               (("repeat", True), ("seed", 5), ("shuffle", True)))
    written = json.loads(path.read_text())
    assert written["cutoffs"] == [100, 300]
    assert written["speedup"] == pytest.approx(3.0) and written["perplexity_gap"] == pytest.approx(0.05)
    assert results["adaptive"] == {"median_step_s": 0.1, "valid_perplexity_stream": 126.0, "params": 1001}
    assert "step time full/adaptive: 3.00x; adaptive perplexity vs full: +5.0%" in capsys.readouterr().out


def test_a_bad_ptb_softmax_flag_value_is_refused_before_anything_is_built(fake_ptb_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ptb.ptb_softmax(["--steps", "many"])
    assert exit_info.value.code == 2
    assert "argument --steps: invalid int value: 'many'" in capsys.readouterr().err
    assert fake_ptb_run.loaded == []


def test_three_variants_differ_only_where_they_should(fake_ptb_run, tmp_path):
    stats = {"stack_1_cv_importance": 0.5, "stack_1_cv_load": 0.25, "stack_1_max_load_ratio": 2.0}
    fake_ptb_run.answers = {WITH: (0.2, 110.0, stats), WITHOUT: (0.2, 115.0, {}), DENSE: (0.1, 130.0, {})}
    path = tmp_path / "out.json"
    results = ptb.moe_ptb(["--steps", "3", "--seed", "2", "--json", str(path)])
    (p1, o1, s1), (p2, o2, s2), (p3, o3, s3) = fake_ptb_run.loaded
    assert (p1, o1, p3, o3) == ("lstm-moe-ptb", {}, "lstm-wide-ptb", {}) and s1 == s2 == s3 == 2
    # the 0/0 variant: the preset's layers with both balancing weights of each MoE layer at 0
    layers = get_preset("lstm-moe-ptb").config["layers"]
    assert p2 == "lstm-moe-ptb" and len(o2["layers"]) == len(layers)
    for mine, theirs in zip(o2["layers"], layers):
        if theirs["type"] == "moe":
            assert mine == {**theirs, "importance_weight": 0.0, "load_weight": 0.0}
        else:
            assert mine == theirs
    assert fake_ptb_run.trained["track"] == ("cv_importance", "cv_load", "max_load_ratio")
    assert fake_ptb_run.trained["steps"] == 3
    assert results[WITH] == {"params": 1000, "median_step_s": 0.2, "cv_importance": 0.5, "cv_load": 0.25,
                             "max_load_ratio": 2.0, "valid_perplexity_stream": 110.0}
    assert results[DENSE]["cv_load"] is None  # no MoE layer: no statistic
    assert json.loads(path.read_text())["results"] == results


def test_a_bad_flag_value_is_refused_before_anything_is_built(fake_ptb_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ptb.moe_ptb(["--seed", "0.5"])
    assert exit_info.value.code == 2
    assert "argument --seed: invalid int value: '0.5'" in capsys.readouterr().err
    assert fake_ptb_run.loaded == []
