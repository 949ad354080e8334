"""The expert shards of an expert-parallel run (`zoo.layers.expert_parallel`), as training sees
them: which variables and optimiser slots are per-replica, the whole tensors a checkpoint holds,
and the unsharded model a preset directory gets.

A shard variable reads as replica 0's value outside `strategy.run` (it is aggregated
`only_first_replica`), so a checkpoint would hold one replica's experts only. Before every save
the shards (and their optimiser slots) are gathered into whole `[E, ...]` tensors held by plain
variables that the checkpoint also tracks (`ExpertShards.wholes`); after a restore each replica
takes its slice back. So one checkpoint holds every expert, and a job restarted with the same
number of replicas resumes exactly.
"""

import keras
import numpy as np
import tensorflow as tf

from zoo.layers.expert_parallel import gather_shards, is_expert_shard, scatter_shards


class ExpertShards:
    """The per-replica state of `model` trained by `optimizer` under `strategy`: `variables` (the
    shards, then their optimiser slots) and `wholes` (one plain variable per entry, R times its
    leading size). Empty (false) for a model without expert-parallel layers."""

    def __init__(self, model, optimizer, strategy):
        self.strategy = strategy
        self.model = model
        self.shards = [v for v in model.trainable_variables if is_expert_shard(v)]
        if not self.shards:
            self.variables, self.wholes = [], []
            return
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            raise ValueError("Expert parallelism does not support mixed precision (a loss-scaling optimiser) yet; "
                             "train it in float32.")
        replicas = strategy.num_replicas_in_sync
        prefixes = [(v.path.replace("/", "_") + "_", v.shape[0]) for v in self.shards]
        self.slots = [v for v in optimizer.variables
                      if any(v.name.startswith(p) and len(v.shape) and v.shape[0] == n for p, n in prefixes)]
        self.variables = self.shards + self.slots
        with tf.init_scope():
            self.wholes = [
                tf.Variable(tf.zeros((v.shape[0] * replicas,) + tuple(v.shape[1:]), v.dtype), trainable=False,
                            name=v.path.replace("/", "_") if hasattr(v, "path") else v.name.replace("/", "_"))
                for v in self.variables]

    def __bool__(self):
        return bool(self.shards)

    def before_save(self):
        """Gathers every shard and slot into `wholes` (a collective: every worker calls it)."""
        for whole, value in zip(self.wholes, gather_shards(self.strategy, self.variables)):
            whole.assign(value)

    def after_restore(self):
        """Gives each replica its slice of the restored `wholes`."""
        scatter_shards(self.strategy, self.variables, [w.read_value() for w in self.wholes])

    def unsharded_weights(self):
        """The values of `model.weights`, in order, with every shard gathered whole (a
        collective: every worker calls it): what an unsharded copy of the model loads."""
        gathered = dict(zip((id(v) for v in self.shards), gather_shards(self.strategy, self.shards)))
        return [gathered[id(w)] if id(w) in gathered else np.asarray(w.numpy()) for w in self.model.weights]


def load_unsharded(model, weights, strategy):
    """Sets an expert-parallel `model`'s weights from the weights of its unsharded twin (in
    `model.weights` order): the mirrored ones as they are, each shard to its replica's slice."""
    shards, wholes = [], []
    for variable, value in zip(model.weights, weights):
        if is_expert_shard(variable):
            shards.append(variable)
            wholes.append(np.asarray(value))
        else:
            variable.assign(value)
    scatter_shards(strategy, shards, wholes)
