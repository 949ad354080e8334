"""The balance statistics (`zoo.layers.moe_statistics`) on hand-made records, the uniform floor
against its binomial formula, and what `SparseMoE.routing_recorded` records."""

import math

import numpy as np
import pytest

from zoo.layers import SparseMoE
from zoo.layers.moe_statistics import RoutingRecord, cv, summarize, uniform_floor


def hand_record(counts, importance=None, entropy=1.0):
    counts = np.asarray(counts, np.float64)
    importance = counts / 2 if importance is None else np.asarray(importance, np.float64)
    return RoutingRecord(counts, importance, counts, entropy, np.full(len(counts), 1 / len(counts)))


def test_summary_of_hand_made_batches_per_batch_over_a_window_and_over_the_run():
    # 4 experts, k = 2, 4 tokens a batch: 8 assignments a batch
    records = [hand_record([4, 2, 2, 0]), hand_record([0, 2, 2, 4]), hand_record([2, 2, 2, 2]),
               hand_record([3, 1, 3, 1])]
    s = summarize(records, k=2, window=2)
    assert s["tokens_per_batch"] == 4 and s["batches"] == 4
    assert s["tokens_per_expert_per_step"] == {"mean": 2.0, "min": 0.0, "max": 4.0}
    per_batch = [cv(r.counts) for r in records]  # sqrt(2)/2, sqrt(2)/2, 0, 1/2
    assert s["per_batch"]["cv_counts"] == pytest.approx(np.mean(per_batch))
    assert s["per_batch"]["max_load_ratio"] == pytest.approx((2 + 2 + 1 + 1.5) / 4)
    # the first window sums to [4, 4, 4, 4] (balanced), the second to [5, 3, 5, 3]
    assert s["per_window"]["cv_counts"] == pytest.approx((0 + 0.25) / 2)
    assert s["per_window"]["floor"]["tokens"] == 8
    assert s["over_the_run"]["assignments"] == [9, 7, 9, 7]
    assert s["over_the_run"]["busiest_share"] == pytest.approx(9 / 32)
    assert s["over_the_run"]["experts_never_used"] == 0
    assert s["router_entropy"] == 1.0 and s["router_entropy_fraction"] == pytest.approx(1 / math.log(4))
    assert s["marginal_entropy_fraction"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="No routing was recorded"):
        summarize([], k=2)


def test_uniform_floor_is_the_binomial_spread():
    floor = uniform_floor(24_576, 4, 256, trials=400)
    # CV of Binomial(n, k/E) counts over 256 experts: about sqrt((1 - k/E) / (n k/E)) = 0.0504
    assert floor["cv_formula"] == pytest.approx(math.sqrt((1 - 4 / 256) / (24_576 * 4 / 256)))
    assert floor["cv_counts"] == pytest.approx(floor["cv_formula"], rel=0.05)
    assert 1.1 < floor["max_load_ratio"] < 1.2  # Table 6's 1.14 is about this floor
    small = uniform_floor(2_048, 4, 256)
    assert 0.15 < small["cv_counts"] < 0.2 and small["max_load_ratio"] > 1.4


def test_routing_recorded_records_each_call_inside_the_block_only():
    layer = SparseMoE(num_experts=4, k=2, hidden_units=8)
    x = np.random.default_rng(0).normal(size=(3, 5, 6)).astype("float32")
    layer(x)
    with layer.routing_recorded() as records:
        layer(x, training=True)
        layer(x[:1])
    layer(x)
    assert len(records) == 2
    assert records[0].counts.sum() == 15 * 2 and records[1].counts.sum() == 5 * 2
    # the gate starts at zero: every expert equally likely, entropy ln 4 whatever the input
    assert records[0].entropy == pytest.approx(math.log(4))
    np.testing.assert_allclose(records[0].marginal, 0.25)
    layer.gate_kernel.assign(np.random.default_rng(1).normal(size=(6, 4)) * 3)
    with layer.routing_recorded() as records:
        layer(x)
    p = np.exp(x.reshape(-1, 6) @ layer.gate_kernel.numpy())
    p /= p.sum(1, keepdims=True)
    assert records[0].entropy == pytest.approx(float(-(p * np.log(p)).sum(1).mean()), rel=1e-5)
    assert records[0].entropy < 0.9 * math.log(4)


def test_hierarchical_gate_distribution_sums_to_one_over_every_expert():
    layer = SparseMoE(num_experts=6, k=[1, 2], groups=2, hidden_units=4)
    x = np.random.default_rng(2).normal(size=(7, 5)).astype("float32")
    layer(x)
    rng = np.random.default_rng(3)
    layer.gate_kernel.assign(rng.normal(size=(5, 2)))
    layer.secondary_gate_kernel.assign(rng.normal(size=(2, 5, 3)))
    p = layer.router.gate_distribution(x, layer.gate_kernels()).numpy()
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-6)
    primary = np.exp(x @ layer.gate_kernel.numpy())
    primary /= primary.sum(1, keepdims=True)
    np.testing.assert_allclose(p.reshape(7, 2, 3).sum(2), primary, rtol=1e-5)  # the groups' marginals
