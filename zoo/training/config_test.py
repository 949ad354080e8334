"""`TrainConfig.schedule` and `check_replicas`: the steps, epochs, checkpoints and progress lines
a config asks for, and the replica counts it refuses. (Its option checks and `with_defaults`:
zoo/training_test.py.)"""

import pytest

from zoo.training.config import UNBOUNDED, TrainConfig


@pytest.mark.parametrize("options, steps, per_epoch", [
    ({}, 10, 10),  # one pass over the data
    ({"epochs": 3}, 30, 10),
    ({"epochs": 3, "steps_per_epoch": 4}, 12, 4),
    ({"steps": 7}, 7, 10),  # steps win over epochs
    ({"steps": 7, "epochs": 3}, 7, 10),
])
def test_schedule_counts_steps_from_steps_or_epochs(options, steps, per_epoch):
    schedule = TrainConfig(**options).schedule(batches_per_pass=10)
    assert (schedule.steps, schedule.steps_per_epoch) == (steps, per_epoch)
    assert schedule.checkpoint_every == per_epoch and not schedule.until_budget


def test_a_time_budget_alone_runs_unbounded_and_with_epochs_keeps_them():
    alone = TrainConfig(max_minutes=1.5).schedule(10)
    assert alone.steps == UNBOUNDED and alone.until_budget
    assert TrainConfig(max_minutes=1.5, epochs=2).schedule(10).steps == 20


@pytest.mark.parametrize("batches, log_every", [(1, 1), (7, 1), (40, 10), (1000, 100)])
def test_progress_lines_come_four_times_an_epoch_at_most_every_100_steps(batches, log_every):
    assert TrainConfig().schedule(batches).log_every == log_every
    assert TrainConfig(log_every=3, checkpoint_every=5).schedule(batches)[2:4] == (5, 3)


def test_check_replicas_refuses_an_uneven_batch_and_expert_parallelism_on_one_replica():
    TrainConfig(global_batch_size=8).check_replicas(4)
    with pytest.raises(ValueError, match="global batch size 6 is not divisible by the 4 replicas"):
        TrainConfig(global_batch_size=6).check_replicas(4)
    with pytest.raises(ValueError, match="more than one replica, got 1"):
        TrainConfig(global_batch_size=8, expert_parallel=True).check_replicas(1)
    TrainConfig(global_batch_size=8, expert_parallel=True).check_replicas(2)


@pytest.mark.parametrize("options, message", [
    ({"max_minutes": 0}, "max_minutes must be > 0, got 0"),
    ({"expert_parallel": "yes"}, "expert_parallel must be True or False, got 'yes'"),
])
def test_bad_budget_or_switch_is_one_sentence(options, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**options)
