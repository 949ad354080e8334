"""The train step and the eval step of a model under a `tf.distribute` strategy.

Exactness: the loss of a step is the mean over the real tokens of the *global* batch (each
replica divides its token sum by the all-reduced token count: the model's `compute_loss`), and
the gradients are all-reduced here, before the optimiser clips them, so a step on N replicas is
the step one device takes on the same global batch. Keras would clip each replica's share and
then sum, so the optimiser's own all-reduce is switched off (`zoo.compat`). With the data order
depending on the step alone, never on the number of workers (`zoo.training.data.TrainingWindows`),
a run on N replicas is the run of one device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import keras
import tensorflow as tf

from zoo import compat
from zoo.layers.expert_parallel import is_expert_shard


class StepFunctions(NamedTuple):
    """The train step and the eval step of a model under a strategy (`step_functions`).

    - `train(iterator)` takes the next global batch of a distributed iterator, applies one
      optimiser step and returns the loss (the mean over the global batch's real tokens);
    - `evaluate(batch)` returns the summed negative log-likelihood of a distributed batch and
      its summed weights (the number of real tokens).

    Example: see `step_functions`.

    >>> from zoo.training import StepFunctions
    >>> StepFunctions._fields
    ('train', 'evaluate')
    """

    train: Callable[[Iterator], tf.Tensor]
    evaluate: Callable[[tuple[tf.Tensor, tf.Tensor, tf.Tensor]], tuple[tf.Tensor, tf.Tensor]]


def step_functions(model: keras.Model, optimizer: keras.optimizers.Optimizer,
                   strategy: tf.distribute.Strategy) -> StepFunctions:
    """`StepFunctions(train, evaluate)`, two `tf.function`s under `strategy`:

    - `train(iterator)` takes the next global batch of a distributed iterator, applies one
      optimiser step and returns the loss (the mean over the global batch's real tokens);
    - `evaluate(batch)` returns the summed negative log-likelihood of a distributed batch and
      its summed weights (the number of real tokens).

    Switches off `optimizer`'s own gradient all-reduce (the train step does it).

    Returns:
        The two steps, as `StepFunctions`.

    Example: one step of a tiny model on one batch of two windows of 4 tokens (weights 1: every
    token counts).

    >>> import numpy as np, zoo
    >>> from zoo.training import step_functions
    >>> model = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[2, 8]]])
    >>> optimizer = keras.optimizers.SGD(0.1)
    >>> strategy = tf.distribute.get_strategy()
    >>> steps = step_functions(model, optimizer, strategy)
    >>> x, y = np.arange(8).reshape(2, 4), np.arange(1, 9).reshape(2, 4)
    >>> batch = tf.data.Dataset.from_tensors((x, y, np.ones((2, 4), "float32")))
    >>> loss = steps.train(iter(strategy.experimental_distribute_dataset(batch)))
    >>> total, count = steps.evaluate((x, y, np.ones((2, 4), "float32")))
    >>> float(count), bool(0 < float(loss) < 2 * np.log(50))  # near log(50): the weights are random
    (8.0, True)
    """
    compat.disable_gradient_all_reduce(optimizer)
    replicas = strategy.num_replicas_in_sync
    sharded = any(is_expert_shard(v) for v in model.trainable_variables)

    def train_replica(x, y, w):
        with tf.GradientTape() as tape:
            hidden = model(x, training=True)
            loss = model.compute_loss(x, y, hidden, w)
            scaled = optimizer.scale_loss(loss)
        variables = model.trainable_variables
        grads = tape.gradient(scaled, variables)
        if replicas > 1:
            # an expert shard's gradient stays on its replica (expert parallelism)
            present = [i for i, g in enumerate(grads) if g is not None and not is_expert_shard(variables[i])]
            reduced = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
            grads = list(grads)
            for i, g in zip(present, reduced):
                grads[i] = g
        if sharded:
            grads = clip_with_shards(optimizer, grads, variables)
        optimizer.apply(grads, variables)
        return loss

    @tf.function
    def train(iterator):
        per_replica = strategy.run(train_replica, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def eval_replica(x, y, w):
        nll = model.head.loss(model(x, training=False), y)
        w = tf.cast(w, nll.dtype)
        return tf.reduce_sum(nll * w), tf.reduce_sum(w)

    @tf.function
    def evaluate(batch):
        total, count = strategy.run(eval_replica, args=batch)
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, total, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, count, axis=None))

    return StepFunctions(train, evaluate)


def clip_with_shards(optimizer: keras.optimizers.Optimizer, grads: list[tf.Tensor | None],
                     variables: list[tf.Variable]) -> list[tf.Tensor | None]:
    """The optimiser's gradient clipping, done here with the whole norms of expert shards.

    An expert shard's gradient is one replica's slice of the expert tensor's gradient, so the
    norms Keras would clip by (`clipnorm`: each variable's; `global_clipnorm`: all of them) are
    the norms of slices. The squared norms of the shards are summed over the replicas and the
    gradients scaled as Keras would scale the whole ones; the optimiser's own clipping then sees
    norms at most the limit and leaves them as they are. (`clipvalue` is elementwise and needs
    nothing.)"""
    context = tf.distribute.get_replica_context()

    def squared(g):
        return tf.reduce_sum(tf.square(tf.cast(g, tf.float32)))

    shard = [g is not None and is_expert_shard(v) for g, v in zip(grads, variables)]
    grads = list(grads)
    if optimizer.clipnorm:
        limit = tf.cast(optimizer.clipnorm, tf.float32)
        indices = [i for i, s in enumerate(shard) if s]
        sums = context.all_reduce(tf.distribute.ReduceOp.SUM, [squared(grads[i]) for i in indices])
        for i, total in zip(indices, sums):
            norm = tf.sqrt(total)
            grads[i] = grads[i] * tf.cast(limit / tf.maximum(norm, limit), grads[i].dtype)
    if optimizer.global_clipnorm:
        limit = tf.cast(optimizer.global_clipnorm, tf.float32)
        local = tf.add_n([squared(g) for g, s in zip(grads, shard) if s])
        dense = [squared(g) for g, s in zip(grads, shard) if g is not None and not s]
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, local) + (tf.add_n(dense) if dense else 0.0)
        scale = limit / tf.maximum(tf.sqrt(total), limit)
        grads = [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]
    return grads
