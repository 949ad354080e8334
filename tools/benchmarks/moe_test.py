"""Fast checks of tools/benchmarks/moe.py at tiny sizes: `zoo benchmark moe` and `optimizer-memory`."""


import numpy as np
import pytest
import tensorflow as tf

from zoo.layers.sparse_moe import SparseMoE


@pytest.fixture(scope="module")
def bench_moe():
    from zoo.tools.benchmarks import moe

    return moe



def quiet(*args, **kwargs):
    pass


def tiny_layer(experts=6, k=2, dim=8, hidden=16):
    layer = SparseMoE(experts, k, hidden)
    layer.build((None, dim))
    rng = np.random.default_rng(1)
    # Non-zero gates (they start at zero), so that tokens go to different experts.
    layer.gate_kernel.assign(rng.standard_normal((dim, experts)).astype("float32"))
    layer.noise_kernel.assign(0.5 * rng.standard_normal((dim, experts)).astype("float32"))
    layer.expert_bias_in.assign(0.1 * rng.standard_normal((experts, hidden)).astype("float32"))
    layer.expert_bias_out.assign(0.1 * rng.standard_normal((experts, dim)).astype("float32"))
    x = tf.constant(rng.standard_normal((2, 5, dim)).astype("float32"))
    return layer, x


def test_dense_reference_equals_sparse_moe_in_eval_mode(bench_moe):
    layer, x = tiny_layer()
    expected = layer(x, training=False).numpy()
    got, auxiliary = bench_moe.dense_reference(layer, x, training=False)
    assert got.shape == expected.shape == (2, 5, 8)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5)
    assert float(auxiliary) == 0.0
    # Not trivially equal: more than k experts are used over the batch.
    assert np.count_nonzero(layer.gates(x).numpy().sum(axis=0)) > 2


def test_dense_reference_equals_sparse_moe_in_training_with_the_same_noise(bench_moe):
    layer, x = tiny_layer()
    noise = tf.constant(np.random.default_rng(2).standard_normal((10, 6)).astype("float32"))
    expected = layer(x, training=True, noise=noise).numpy()
    expected_losses = float(tf.add_n(layer.losses))
    got, auxiliary = bench_moe.dense_reference(layer, x, training=True, noise=noise)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5)
    assert expected_losses > 0
    assert float(auxiliary) == pytest.approx(expected_losses, rel=1e-5)


def test_step_time_estimates_scale_by_modelled_cost(bench_moe):
    linear = lambda e: float(e)  # noqa: E731
    assert bench_moe.estimate_step_s({}, 32, linear) is None
    assert bench_moe.estimate_step_s({4: 1.0}, 32, linear) == pytest.approx(8.0)
    assert bench_moe.estimate_step_s({4: 1.0, 32: 2.0}, 256, linear) == pytest.approx(16.0)  # from E=32
    assert bench_moe.estimate_step_s({4: 1.0}, 256, lambda e: 1.0) == pytest.approx(1.0)
    assert bench_moe.estimate_step_s({256: 1.0}, 32, linear) is None  # only smaller E count
    # The dense reference's modelled cost grows with E; ours and MoeLayer's barely do.
    cost = lambda model, e: bench_moe.forward_gflop(model, 8192, 512, 1024, e, 4, 512)  # noqa: E731
    assert cost("dense", 256) / cost("dense", 4) > 60
    assert cost("dense", 4) == pytest.approx(cost("ours", 4))  # k = E: the same work
    assert cost("ours", 256) / cost("ours", 4) < 1.1  # only the gate grows
    assert cost("official", 256) / cost("official", 4) < 1.1


def test_skip_reasons(bench_moe):
    sizes = {"tokens": 8192, "input_dim": 512, "hidden": 1024, "k": 4, "group_size": 512}
    gib = 2**30
    assert bench_moe.skip_reason("ours", 256, {4: 1e6}, sizes, 1.0) is None  # ours always runs
    assert bench_moe.skip_reason("dense", 4, {}, sizes, 1.0, 100 * gib) is None  # nothing to go by yet
    slow = bench_moe.skip_reason("dense", 256, {32: 10.0}, sizes, 60.0, 100 * gib)
    assert slow["estimate_s"] > 60 and "est." in slow["skipped"]
    # [8192, 256, 1024 + 512] floats, thrice: ~48 GiB, more than 60% of 16 GiB.
    big = bench_moe.skip_reason("dense", 256, {}, sizes, 1e9, 16 * gib)
    assert "GiB of activations" in big["skipped"]
    assert bench_moe.skip_reason("dense", 32, {}, sizes, 1e9, 16 * gib) is None  # ~4.5 GiB fits
    assert bench_moe.skip_reason("official", 256, {4: 10.0}, sizes, 60.0) is None  # its cost barely grows
    tiny_group = bench_moe.skip_reason("official", 256, {}, dict(sizes, group_size=16), 60.0)
    assert "capacity" in tiny_group["skipped"]


@pytest.mark.ci
def test_moe_benchmark_runs_all_models_and_skips_by_estimate(bench_moe):
    sizes = {"tokens": 32, "input_dim": 8, "hidden": 16, "k": 2, "group_size": 16}
    # With a 0 s limit every configuration after the first is estimated too slow, except ours.
    report = bench_moe.run_benchmark(sizes, [2, 4], repeats=1, max_step_s=0.0, log=quiet)
    first, second = report["configs"][2], report["configs"][4]
    for model in bench_moe.MODELS:
        assert first[model]["median_s"] > 0 and np.isfinite(first[model]["loss"])
        assert len(first[model]["times_s"]) == 1
    # ours and the dense reference share one SparseMoE; MoeLayer has its own experts and router.
    assert first["ours"]["params"] == first["dense"]["params"]
    assert first["official"]["params"] == 2 * (8 * 16 + 16 + 16 * 8 + 8) + 8 * 2 + 2
    assert second["ours"]["median_s"] > 0
    for model in ("dense", "official"):
        assert "skipped" in second[model] and second[model]["estimate_s"] > 0
    assert report["ours_ratio"] == pytest.approx(second["ours"]["median_s"] / first["ours"]["median_s"])
    with pytest.raises(ValueError, match="group-size"):
        bench_moe.run_benchmark(dict(sizes, group_size=5), [2], log=quiet)


# ---- optimizer-memory
@pytest.mark.parametrize("biases", [False, True])
def test_optimizer_state_bytes_follow_the_formulas(bench_moe, biases):
    e, d, h = 4, 8, 16
    sizes = {"experts": e, "k": 2, "input_dim": d, "hidden": h}
    report = bench_moe.memory_benchmark(sizes, repeats=1, biases=biases, log=quiet)
    r = report["results"]
    floats = 4
    # Appendix D: a row ([E, rows]) and a column ([E, cols]) vector per expert matrix, no momentum.
    ours = 2 * e * (d + h)
    adam = 2 * (2 * e * d * h)  # first and second moment of both kernels
    adafactor = 2 * e * d * h + 2 * e * (d + h)  # full-size velocity plus the row/column factors
    if biases:
        # FactorizedAdam's own default decides whether a stacked bias [E, n] is factored (an E x n
        # matrix: E + n floats) or gets Adam's two moments (2·E·n floats); the report says which.
        factored = r["factorized_adam"]["factored"]
        assert factored[:2] == [True, True]
        for n, is_factored in zip((h, d), factored[2:]):
            ours += (e + n) if is_factored else 2 * e * n
        adam += 2 * (e * h + e * d)
        adafactor += (e * h + e * d) + (e + h) + (e + d)  # Keras factors every rank-2 variable
    assert report["params"] == 2 * e * d * h + (e * h + e * d if biases else 0)
    assert r["factorized_adam"]["state_bytes"] == ours * floats
    assert r["adam"]["state_bytes"] == adam * floats
    assert r["adafactor"]["state_bytes"] == adafactor * floats
    if r["factorized_adam"].get("helper_state_bytes") is not None:
        assert r["factorized_adam"]["helper_state_bytes"] == ours * floats
    assert r["factorized_adam"]["bytes_vs_adam"] == pytest.approx(ours / adam)
    for name in bench_moe.OPTIMIZERS:
        assert r[name]["median_s"] > 0 and len(r[name]["times_s"]) == 1


def test_optimizer_steps_change_the_expert_weights(bench_moe):
    import keras

    sizes = {"experts": 2, "k": 1, "input_dim": 4, "hidden": 8}
    layer, variables = bench_moe.expert_variables(sizes)
    before = [v.numpy().copy() for v in variables]
    optimizer = bench_moe.make_optimizer("factorized_adam")
    optimizer.apply_gradients(zip([tf.ones(v.shape) for v in variables], variables))
    for old, v in zip(before, variables):
        assert not np.allclose(old, v.numpy())
    with pytest.raises(ValueError, match="unknown optimizer"):
        bench_moe.make_optimizer("sgd")
    assert isinstance(bench_moe.make_optimizer("adafactor"), keras.optimizers.Adafactor)

