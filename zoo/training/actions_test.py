"""The training loop's actions (zoo/training/actions.py): the time budget and the progress line."""

import types

import pytest
import tensorflow as tf

from zoo.metrics import PerplexityMetric
from zoo.training import actions


def test_the_time_budget_is_spent_once_its_minutes_have_passed(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(actions.time, "monotonic", lambda: clock[0])
    budget, unbounded = actions.TimeBudget(0.5, tf.distribute.get_strategy()), \
        actions.TimeBudget(None, tf.distribute.get_strategy())
    clock[0] += 29.0
    assert not budget.spent() and budget.elapsed() == 29.0
    clock[0] += 2.0
    assert budget.spent() and not unbounded.spent()


def test_the_progress_line_gives_the_tokens_per_second_since_the_last_line(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(actions.time, "monotonic", lambda: clock[0])
    metric = PerplexityMetric()
    metric.update_state(4.0, 2)
    model = types.SimpleNamespace(metrics=[metric])
    written, lines = [], []
    summaries = types.SimpleNamespace(scalars=lambda step, values: written.append((step, values)))
    log = actions.ProgressLog(model, types.SimpleNamespace(until_budget=False, steps=10), 64, lines.append, summaries)
    for _ in range(3):
        log.count_step()
    clock[0] = 2.0
    log(3, 1.23456)
    assert lines == ["step 3/10  loss 1.2346  perplexity 7.39 since validation  96 tokens/s"]  # 3 × 64 tokens in 2 s
    assert written[0][0] == 3 and written[0][1]["perplexity"] == pytest.approx(7.389, abs=1e-3)
    log.restart()
    clock[0] = 3.0
    log.schedule.until_budget = True  # a run bounded by minutes has no last step to print
    log(4, 1.0)
    assert lines[-1].startswith("step 4  loss") and lines[-1].endswith("  0 tokens/s")
