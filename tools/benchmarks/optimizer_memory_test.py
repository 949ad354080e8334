"""Fast checks of the `zoo benchmark optimizer-memory` module at tiny sizes."""

import numpy as np
import pytest
import tensorflow as tf


@pytest.fixture(scope="module")
def bench_memory():
    from zoo.tools.benchmarks import optimizer_memory

    return optimizer_memory



def quiet(*args, **kwargs):
    pass



@pytest.mark.parametrize("biases", [False, True])
def test_optimizer_state_bytes_follow_the_formulas(bench_memory, biases):
    e, d, h = 4, 8, 16
    sizes = {"experts": e, "k": 2, "input_dim": d, "hidden": h}
    report = bench_memory.run_benchmark(sizes, repeats=1, biases=biases, log=quiet)
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
    for name in bench_memory.OPTIMIZERS:
        assert r[name]["median_s"] > 0 and len(r[name]["times_s"]) == 1


def test_optimizer_steps_change_the_expert_weights(bench_memory):
    import keras

    sizes = {"experts": 2, "k": 1, "input_dim": 4, "hidden": 8}
    layer, variables = bench_memory.expert_variables(sizes)
    before = [v.numpy().copy() for v in variables]
    optimizer = bench_memory.make_optimizer("factorized_adam")
    optimizer.apply_gradients(zip([tf.ones(v.shape) for v in variables], variables))
    for old, v in zip(before, variables):
        assert not np.allclose(old, v.numpy())
    with pytest.raises(ValueError, match="unknown optimizer"):
        bench_memory.make_optimizer("sgd")
    assert isinstance(bench_memory.make_optimizer("adafactor"), keras.optimizers.Adafactor)

