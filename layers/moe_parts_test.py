"""`SparseMoE` composes a router and experts that are Keras layers, and takes either from outside
the package: a router of one's own (here a top-k router with a bias per expert, defined in this
file) and experts of one's own give equation 1's mixture computed from them, train, save and load."""

import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from zoo.layers import SparseMoE
from zoo.layers.moe_experts import FeedForwardExperts
from zoo.layers.moe_router import NoisyTopKRouter, Routing

DIM, EXPERTS, HIDDEN = 5, 4, 6


@keras.saving.register_keras_serializable(package="moe_parts_test")
class BiasedTopKRouter(keras.layers.Layer):
    """Not the paper's gate: logits x·W + b, no noise, the top k softmaxed; Importance is the sum
    of the gates and Load the count of tokens (what equations 6 and 11 are computed from)."""

    def __init__(self, num_experts, k, **kwargs):
        super().__init__(**kwargs)
        self.num_experts, self.k = num_experts, k

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.num_experts))
        self.bias = self.add_weight(name="bias", shape=(self.num_experts,), initializer="zeros")

    def call(self, x, training=None):
        logits = ops.matmul(x, self.kernel) + self.bias
        values, kept = ops.top_k(logits, self.k)
        gates = ops.reshape(ops.softmax(values, axis=-1), (-1,))
        expert_ids = ops.reshape(kept, (-1,))
        counts = ops.sum(ops.one_hot(expert_ids, self.num_experts), axis=0)
        return Routing(token_ids=tf.repeat(tf.range(ops.shape(x)[0]), self.k), expert_ids=expert_ids, gates=gates,
                       importance=tf.math.unsorted_segment_sum(gates, expert_ids, self.num_experts), load=counts,
                       counts=counts)

    def get_config(self):
        return {**super().get_config(), "num_experts": self.num_experts, "k": self.k}


@keras.saving.register_keras_serializable(package="moe_parts_test")
class LinearExperts(keras.layers.Layer):
    """Experts of one's own: expert i is x·A_i (no hidden layer), gate-weighted and summed."""

    def __init__(self, num_experts, **kwargs):
        super().__init__(**kwargs)
        self.num_experts = num_experts

    def build(self, input_shape):
        self.a = self.add_weight(name="a", shape=(self.num_experts, input_shape[-1], input_shape[-1]))

    def call(self, x, routing):
        rows = ops.einsum("ad,ade->ae", tf.gather(x, routing["token_ids"]), tf.gather(self.a, routing["expert_ids"]))
        return tf.math.unsorted_segment_sum(rows * routing["gates"][:, None], routing["token_ids"], ops.shape(x)[0])

    def get_config(self):
        return {**super().get_config(), "num_experts": self.num_experts}


def x_tokens(n=9):
    return np.random.default_rng(3).normal(size=(n, DIM)).astype("float32")


def randomized(layer):
    layer.build((None, DIM))
    rng = np.random.default_rng(0)
    for v in layer.weights:
        v.assign(rng.normal(size=v.shape).astype("float32"))
    return layer


def expected_mixture(x, kernel, bias, expert):
    """Equation 1 by numpy: the top-2 of x·W + b softmaxed, Σ over those experts of gate · E_i(x)."""
    out = []
    for row in x:
        logits = row @ kernel + bias
        top = np.argsort(-logits, kind="stable")[:2]
        e = np.exp(logits[top] - logits[top].max())
        out.append(sum(g * expert(i, row) for g, i in zip(e / e.sum(), top)))
    return np.array(out)


def feed_forward(layer):
    w1, b1, w2, b2 = (np.asarray(v) for v in (layer.expert_kernel_in, layer.expert_bias_in,
                                              layer.expert_kernel_out, layer.expert_bias_out))
    return lambda i, row: np.maximum(row @ w1[i] + b1[i], 0) @ w2[i] + b2[i]


def test_a_router_from_outside_the_package_routes_and_trains_and_its_losses_are_the_papers():
    layer = randomized(SparseMoE(EXPERTS, 2, HIDDEN, router=BiasedTopKRouter(EXPERTS, 2, name="mine")))
    assert layer.router.name == "mine" and isinstance(layer.experts, FeedForwardExperts)
    x = x_tokens()
    kernel, bias = np.asarray(layer.router.kernel), np.asarray(layer.router.bias)
    np.testing.assert_allclose(layer(x), expected_mixture(x, kernel, bias, feed_forward(layer)), rtol=1e-5, atol=1e-5)
    # the losses of equations 7 and 11 from the router's Importance and Load
    with tf.GradientTape() as tape:
        y = layer(x, training=True)
        total = ops.sum(y) + ops.sum(layer.losses)
    routing = layer.route(x)
    cv2 = lambda v: np.var(v) / np.mean(v) ** 2  # noqa: E731
    np.testing.assert_allclose([float(v) for v in layer.losses],
                               [0.1 * cv2(np.asarray(routing["importance"])), 0.1 * cv2(np.asarray(routing["counts"]))],
                               rtol=1e-5)
    names = [v.name for v in layer.trainable_variables]
    assert names == ["expert_kernel_in", "expert_bias_in", "expert_kernel_out", "expert_bias_out", "kernel", "bias"]
    grads = dict(zip(names, tape.gradient(total, layer.trainable_variables)))
    assert float(ops.max(ops.abs(grads["kernel"]))) > 0 and float(ops.max(ops.abs(grads["expert_kernel_in"]))) > 0


def test_experts_from_outside_the_package_compute_the_mixture():
    layer = randomized(SparseMoE(EXPERTS, 2, HIDDEN, experts=LinearExperts(EXPERTS),
                                 router=BiasedTopKRouter(EXPERTS, 2)))
    x = x_tokens()
    a = np.asarray(layer.experts.a)
    expected = expected_mixture(x, np.asarray(layer.router.kernel), np.asarray(layer.router.bias),
                                lambda i, row: row @ a[i])
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-5)


def test_parts_from_outside_save_and_load_with_the_layer(tmp_path):
    layer = randomized(SparseMoE(EXPERTS, 2, HIDDEN, router=BiasedTopKRouter(EXPERTS, 2), name="moe"))
    x = x_tokens()
    inputs = keras.Input((DIM,))
    model = keras.Model(inputs, layer(inputs))
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    assert isinstance(again.layers[-1].router, BiasedTopKRouter)
    np.testing.assert_allclose(again(x), model(x), rtol=1e-6)
    # a .weights.h5 file into a layer of the same parts
    model.save_weights(tmp_path / "m.weights.h5")
    fresh = SparseMoE(EXPERTS, 2, HIDDEN, router=BiasedTopKRouter(EXPERTS, 2), name="moe")
    fresh_model = keras.Model(inputs := keras.Input((DIM,)), fresh(inputs))
    fresh_model.load_weights(tmp_path / "m.weights.h5")
    np.testing.assert_allclose(fresh_model(x), model(x), rtol=1e-6)


def test_the_default_parts_are_layers_usable_alone_and_the_layer_saves_them_as_before(tmp_path):
    layer = SparseMoE(EXPERTS, 2, HIDDEN, name="moe")
    assert isinstance(layer.router, NoisyTopKRouter) and isinstance(layer.experts, FeedForwardExperts)
    randomized(layer)
    x = x_tokens()
    routing = layer.router(x)
    np.testing.assert_allclose(layer(x), layer.experts(x, routing), rtol=1e-6)
    assert layer.gate_kernel is layer.router.gate_kernel and layer.expert_bias_out is layer.experts.expert_bias_out
    assert layer.gate_kernel.path == "moe/router/gate_kernel"
    # the one list of variables, in the order of the layer before its parts were layers
    keras.saving.save_weights(layer, os.path.join(tmp_path, "w.weights.h5"))

    with h5py.File(tmp_path / "w.weights.h5") as f:
        assert sorted(f["vars"]) == [str(i) for i in range(6)]
        arrays = []
        f.visititems(lambda name, item: arrays.append(name) if isinstance(item, h5py.Dataset) else None)
        assert sorted(arrays) == [f"vars/{i}" for i in range(6)]  # nothing under router/ or experts/
        np.testing.assert_array_equal(f["vars/4"], layer.gate_kernel.numpy())
    # a router used alone saves its own weights
    router = randomized(NoisyTopKRouter(EXPERTS, 2))
    keras.saving.save_weights(router, os.path.join(tmp_path, "r.weights.h5"))
    alone = NoisyTopKRouter(EXPERTS, 2)
    alone.build((None, DIM))
    keras.saving.load_weights(alone, os.path.join(tmp_path, "r.weights.h5"))
    np.testing.assert_array_equal(alone.gate_kernel.numpy(), router.gate_kernel.numpy())


@pytest.mark.parametrize("kwargs, message", [
    ({"router": BiasedTopKRouter(3, 2)}, "router 'biased_top_k_router.*' has num_experts=3 but the SparseMoE has num_experts=4"),
    ({"experts": FeedForwardExperts(5, HIDDEN)}, "experts 'feed_forward_experts.*' has num_experts=5 but the SparseMoE has num_experts=4"),
    ({"router": "top2"}, "router must be a Keras layer .*, got str"),
    ({"experts": LinearExperts(EXPERTS), "expert_parallel": True}, "expert_parallel shards the experts the layer makes"),
])
def test_a_part_that_does_not_fit_is_one_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SparseMoE(EXPERTS, 2, HIDDEN, **kwargs)


def test_recording_the_routing_needs_a_router_with_the_full_distribution():
    layer = randomized(SparseMoE(EXPERTS, 2, HIDDEN, router=BiasedTopKRouter(EXPERTS, 2)))
    with pytest.raises(ValueError, match="BiasedTopKRouter has no gate_distribution"):
        with layer.routing_recorded():
            pass
