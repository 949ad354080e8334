"""The train step and the eval step of a model under a `tf.distribute` strategy.

Exactness: the loss of a step is the mean over the real tokens of the *global* batch (each
replica divides its token sum by the all-reduced token count: the model's `compute_loss`), and
the gradients are all-reduced here, before the optimiser clips them, so a step on N replicas is
the step one device takes on the same global batch. Keras would clip each replica's share and
then sum, so the optimiser's own all-reduce is switched off (`zoo.compat`). With the data order
depending on the step alone, never on the number of workers (`zoo.training.data.TrainingWindows`),
a run on N replicas is the run of one device.
"""

import collections

import tensorflow as tf

from zoo import compat

StepFunctions = collections.namedtuple("StepFunctions", "train evaluate")


def step_functions(model, optimizer, strategy):
    """`StepFunctions(train, evaluate)`, two `tf.function`s under `strategy`:

    - `train(iterator)` takes the next global batch of a distributed iterator, applies one
      optimiser step and returns the loss (the mean over the global batch's real tokens);
    - `evaluate(batch)` returns the summed negative log-likelihood of a distributed batch and
      its summed weights (the number of real tokens).

    Switches off `optimizer`'s own gradient all-reduce (the train step does it)."""
    compat.disable_gradient_all_reduce(optimizer)
    replicas = strategy.num_replicas_in_sync

    def train_replica(x, y, w):
        with tf.GradientTape() as tape:
            hidden = model(x, training=True)
            loss = model.compute_loss(x, y, hidden, w)
            scaled = optimizer.scale_loss(loss)
        variables = model.trainable_variables
        grads = tape.gradient(scaled, variables)
        if replicas > 1:
            present = [i for i, g in enumerate(grads) if g is not None]
            reduced = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
            grads = list(grads)
            for i, g in zip(present, reduced):
                grads[i] = g
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
