"""Decisions every worker of a multi-worker job must take together (a collective step needs
every worker, so one that stops or resumes elsewhere alone would hang the others)."""

import tensorflow as tf

from zoo.training import distribute


def any_worker(strategy):
    """A function of a local flag returning whether any worker's flag is set, the same answer on
    every worker (just `bool` outside a multi-worker job)."""
    if not distribute.is_multi_worker(strategy):
        return bool

    @tf.function
    def any_flag(flag):
        value = strategy.run(lambda: tf.identity(flag))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0

    return lambda flag: bool(any_flag(tf.constant(int(flag))))


def min_max(strategy, value):
    """The lowest and the highest of every replica's integer `value`."""
    @tf.function
    def reduce(v):
        per_replica = strategy.run(lambda: tf.reshape(v, [1]))
        return strategy.gather(per_replica, axis=0)  # every replica's value

    values = reduce(tf.constant(value, tf.int64)).numpy()
    return int(values.min()), int(values.max())
