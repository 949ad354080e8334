"""`zoo benchmark moe-cost` on tiny stand-ins for the two presets: its ratios are each model's
median over the dense twin's, generation is compared mode for mode, the mixture gets the
factorised Adam in its second timing, and the profile's ops are grouped by their name scope."""

import json

import numpy as np
import pytest

from zoo.tools.benchmarks import moe_cost


@pytest.mark.ci  # a benchmark's quick form, which the ci tier runs
def test_ratios_and_modes_on_tiny_models(monkeypatch, tiny_model, tmp_path):
    built = []

    def tiny(preset, seed):
        overrides = ({"moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8}} if "moe" in preset
                     else {"feed_forward": {"after_blocks": [0], "hidden_units": 16}})
        model = tiny_model("gcnn", blocks=[[[3, 8]], [[2, 8]]], vocabulary_size=600,
                           optimizer={"name": "adam", "learning_rate": 1e-3}, **overrides)
        built.append(preset)
        return model, False

    monkeypatch.setattr(moe_cost, "_model", tiny)
    optimizers = []
    step = moe_cost._step
    monkeypatch.setattr(moe_cost, "_step", lambda model, spec, batches: optimizers.append(spec["name"]) or
                        step(model, spec, batches))
    path = tmp_path / "cost.json"
    out = moe_cost.main(["--repeats", "1", "--steps", "1", "--tokens", "2", "--json", str(path)])
    assert built == ["gcnn-moe-en", "gcnn-wide-en", "gcnn-moe-en"]
    assert optimizers == ["adam", "adam", "factorized_adam"]
    assert out["train_step_ratio"]["dense"] == 1.0
    for name, seconds in out["train_step_seconds"].items():
        assert seconds > 0
        np.testing.assert_allclose(out["train_step_ratio"][name], seconds / out["train_step_seconds"]["dense"])
    rates = out["generate_tokens_per_second"]
    assert set(rates) == {f"{m}, batch {b}, {mode}" for b in (1, 32) for m, mode in
                          (("dense", "graph"), ("moe", "graph"), ("dense", "XLA"))}
    for b in (1, 32):
        np.testing.assert_allclose(out["generate_ratio"][f"batch {b}, graph"],
                                   rates[f"moe, batch {b}, graph"] / rates[f"dense, batch {b}, graph"])
    assert json.loads(path.read_text())["train_step_ratio"]["dense"] == 1.0


def test_profiled_ops_are_grouped_by_their_name_scope():
    assert moe_cost._group("gradient_tape/gcnn_language_model/moe_3/MatMul").startswith("mixture of experts")
    assert moe_cost._group("adam/Mul_3") == "optimiser update"
    assert moe_cost._group("factorized_adam/Sqrt") == "optimiser update"
    assert moe_cost._group("gcnn_language_model/block_2/conv_0/convolution").startswith("convolution blocks")
    assert moe_cost._group("SparseSoftmaxCrossEntropyWithLogits").startswith("the rest")
