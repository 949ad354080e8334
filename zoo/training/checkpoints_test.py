"""Training checkpoints: which steps a folder holds, keeping the newest, falling back past a
corrupt one."""

import os

import numpy as np
import tensorflow as tf

from zoo.training import checkpoints


def variable_checkpoint(value):
    variable = tf.Variable(np.float32(value))
    return variable, tf.train.Checkpoint(v=variable)


def test_only_checkpoints_with_an_index_count_newest_first(tmp_path):
    for name in ("ckpt-3.index", "ckpt-12.index", "ckpt-7.data-00000-of-00001", "other-5.index"):
        (tmp_path / name).write_bytes(b"")
    assert checkpoints.checkpoint_steps(str(tmp_path)) == [12, 3]
    assert checkpoints.checkpoint_path("d", 4) == "d/ckpt-4"


def test_save_keeps_the_newest_and_restore_reads_the_latest(tmp_path):
    variable, checkpoint = variable_checkpoint(0.0)
    for step in (1, 2, 3):
        variable.assign(float(step))
        checkpoints.save_checkpoint(checkpoint, str(tmp_path), step, keep=2, chief=True)
    assert checkpoints.checkpoint_steps(str(tmp_path)) == [3, 2]
    assert not list(tmp_path.glob("ckpt-1.*"))
    fresh, checkpoint = variable_checkpoint(-1.0)
    assert checkpoints.restore_latest(checkpoint, str(tmp_path), log=print) == 3
    assert float(fresh.numpy()) == 3.0


def test_a_non_chief_save_leaves_nothing_behind(tmp_path):
    _, checkpoint = variable_checkpoint(1.0)
    checkpoints.save_checkpoint(checkpoint, str(tmp_path), 5, keep=2, chief=False)
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path):
    variable, checkpoint = variable_checkpoint(0.0)
    for step in (1, 2):
        variable.assign(float(step))
        checkpoints.save_checkpoint(checkpoint, str(tmp_path), step, keep=5, chief=True)
    (tmp_path / "ckpt-2.index").write_bytes(b"not an index")
    fresh, checkpoint = variable_checkpoint(-1.0)
    logged = []
    assert checkpoints.restore_latest(checkpoint, str(tmp_path), log=logged.append) == 1
    assert float(fresh.numpy()) == 1.0
    assert len(logged) == 1 and "ckpt-2 is unreadable" in logged[0]


def test_an_empty_folder_starts_from_step_0_silently(tmp_path):
    _, checkpoint = variable_checkpoint(0.0)
    logged = []
    assert checkpoints.restore_latest(checkpoint, str(tmp_path), log=logged.append) == 0
    assert logged == []


def test_the_manager_keeps_its_state_and_a_run_written_before_it_resumes_and_is_swept(tmp_path):
    variable, checkpoint = variable_checkpoint(0.0)
    for step in (1, 2):  # as the zoo wrote checkpoints before it used tf.train.CheckpointManager
        variable.assign(float(step))
        checkpoint.write(checkpoints.checkpoint_path(str(tmp_path), step))
    fresh, checkpoint = variable_checkpoint(-1.0)
    assert checkpoints.restore_latest(checkpoint, str(tmp_path), log=print) == 2 and float(fresh.numpy()) == 2.0
    fresh.assign(3.0)
    checkpoints.save_checkpoint(checkpoint, str(tmp_path), 3, keep=2, chief=True)
    assert checkpoints.checkpoint_steps(str(tmp_path)) == [3, 2]  # keep-N over the old ones too
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-3"]
    checkpoints.save_checkpoint(checkpoint, str(tmp_path), 4, keep=2, chief=True)
    assert checkpoints.checkpoint_steps(str(tmp_path)) == [4, 3]
    (tmp_path / "ckpt-5.index").write_bytes(b"cut")  # a save cut after its index, before the state update
    logged = []
    assert checkpoints.restore_latest(variable_checkpoint(0.0)[1], str(tmp_path), log=logged.append) == 4
    assert "ckpt-5 is unreadable" in logged[0]
