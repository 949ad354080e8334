"""`train_side_by_side`: one step per model per batch, in turn; the median step time leaves out the
first five steps; only the tracked metrics are averaged, over the last 100 steps."""

import itertools

import pytest

from zoo.tools.benchmarks import harness, side_by_side


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
    out = side_by_side.train_side_by_side(models, Batches(130), 120, report_every=0, track=("cv_load",))
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
    out = side_by_side.train_side_by_side({"m": Model("m", [])}, Batches(8), 8, report_every=0)
    assert out["m"] == {"median_step_s": 3.0, "metrics": {}}
    out = side_by_side.train_side_by_side({"m": Model("m", [])}, Batches(3), 3, report_every=0)
    assert out["m"]["median_step_s"] == 9.0  # three steps: all of them count


def test_progress_is_reported_every_report_every_steps(monkeypatch, capsys):
    side_by_side.train_side_by_side({"m": Model("m", [])}, Batches(5), 5, report_every=2)
    assert capsys.readouterr().out == "  step 2/5\n  step 4/5\n"
