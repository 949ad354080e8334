"""Expert shards as training sees them (zoo/training/sharding.py), on a model without any: nothing
to gather, and its unsharded weights load as they are. (Sharded runs: layers/expert_parallel_test.py.)"""

import numpy as np
import tensorflow as tf

from zoo.training.sharding import ExpertShards, load_unsharded


def test_a_model_without_expert_shards_has_none_and_loads_its_twins_weights(tiny_model):
    model, twin = tiny_model("moe"), tiny_model("moe", seed=1)
    strategy = tf.distribute.get_strategy()
    for m in (model, twin):
        m(np.zeros((1, 3), "int32"))  # built: every weight exists
    assert model.get_weights() and not np.array_equal(model.get_weights()[0], twin.get_weights()[0])
    shards = ExpertShards(model, None, strategy)
    assert not shards and shards.variables == [] and shards.wholes == []
    load_unsharded(model, twin.get_weights(), strategy)
    for got, want in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)
