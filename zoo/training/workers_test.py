"""Decisions every worker takes together, outside a multi-worker job (one worker, one replica)."""

import tensorflow as tf

from zoo.training import workers


def test_outside_a_multi_worker_job_any_worker_is_the_local_flag():
    any_worker = workers.any_worker(tf.distribute.get_strategy())
    assert any_worker is bool
    assert any_worker(1) is True and any_worker(0) is False


def test_min_max_of_one_replica_is_its_own_value():
    assert workers.min_max(tf.distribute.get_strategy(), 7) == (7, 7)
    assert workers.min_max(tf.distribute.OneDeviceStrategy("/cpu:0"), -3) == (-3, -3)
