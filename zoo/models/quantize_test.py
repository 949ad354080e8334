"""`lm.quantize("int8")` on whole models: close to float32, decoding equal to scoring, a quantized
preset directory round trip, and the bad input of issue 35 (each one sentence, nothing changed)."""

import hashlib
import os

import numpy as np
import pytest

import zoo

IDS = np.array([[3, 7, 11, 4, 9, 20, 5, 8], [12, 3, 3, 40, 6, 2, 17, 9]])


def _digest(directory):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            h.update(name.encode() + open(os.path.join(root, name), "rb").read())
    return h.hexdigest()


MODELS = {
    "gcnn-adaptive": ("gcnn", dict(blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]], cutoffs=[10, 30])),
    "gcnn-tied": ("gcnn", dict(blocks=[[[3, 8]], [[2, 8]]], tie_embeddings=True)),
    "lstmp": ("lstm", dict(layers=[{"type": "lstm", "units": 24, "projection": 16}], embedding_dim=16)),
    "gcnn-moe": ("gcnn", dict(blocks=[[[3, 16]], [[2, 16]]], cutoffs=[10, 30],
                              moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8})),
}
# float32 matrices that stay float32: the experts' gates (their top-k decides the routing), their
# stacked biases (a vector per expert) and the scales of their kernels, one per expert and output channel
FLOAT_MATRICES = ("gate_kernel", "noise_kernel", "expert_bias_in", "expert_bias_out", "_scale")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_matrix_is_int8_and_decoding_one_token_at_a_time_equals_scoring(name, tiny_model):
    family, overrides = MODELS[name]
    model = tiny_model(family, **overrides)
    for layer in getattr(model, "moe_layers", []):  # gates that route tokens apart (they start at zero)
        layer.gate_kernel.assign(np.random.default_rng(0).normal(size=layer.gate_kernel.shape))
    float_lp = np.asarray(model.log_probs(IDS))
    float_bytes = sum(np.asarray(w).nbytes for w in model.weights)
    model.quantize("int8")
    assert model.quantization == "int8" and model.get_config()["quantization"] == "int8"
    # every weight of two or more dimensions is int8; what stays float32 is biases and scales
    assert {w.path: w.dtype for w in model.weights if len(w.shape) >= 2 and w.dtype != "int8"
            and not w.path.endswith(FLOAT_MATRICES)} == {}
    assert sum(np.asarray(w).nbytes for w in model.weights) < 0.4 * float_bytes
    lp = np.asarray(model.log_probs(IDS))  # the traces of the float32 weights are not reused
    assert 0 < np.abs(lp - float_lp).max() < 0.1
    state, steps = None, []
    for t in range(IDS.shape[1]):
        step_lp, state = model.decode_step(IDS[:, t], state)
        steps.append(np.asarray(step_lp))
    np.testing.assert_allclose(np.stack(steps, 1), lp, atol=1e-4)
    # generation dequantizes once, before the loop, and picks what scoring ranks first (<pad> and
    # <s>, ids 0 and 1, are never generated)
    for jit_compile in (False,) if name == "gcnn-moe" else (False, True):  # mixtures stay off XLA
        ids = [3, 7, 11]
        for _ in range(4):
            ids.append(int(np.argmax(np.asarray(model.log_probs(np.array([ids])))[0, -1, 2:])) + 2)
        assert model.generate([ids[:3]], max_new_tokens=4, sampler="greedy", stop=None, jit_compile=jit_compile) \
            == [ids]


def test_a_quantized_preset_directory_loads_as_it_was_saved_and_the_float_one_is_untouched(tiny_model,
                                                                                           word_tokenizer, tmp_path):
    model = tiny_model("gcnn", tokenizer=word_tokenizer, cutoffs=[5])
    float_dir = model.save_to_preset(str(tmp_path / "float"))
    before = _digest(float_dir)
    loaded = zoo.load(float_dir)
    loaded.quantize("int8")
    quantized_dir = loaded.save_to_preset(str(tmp_path / "int8"))
    again = zoo.load(quantized_dir)
    assert again.quantization == "int8"
    ids = IDS % len(word_tokenizer)
    np.testing.assert_array_equal(np.asarray(again.log_probs(ids)), np.asarray(loaded.log_probs(ids)))
    assert _digest(float_dir) == before
    assert os.path.getsize(os.path.join(quantized_dir, "model.weights.h5")) < \
        os.path.getsize(os.path.join(float_dir, "model.weights.h5"))


def test_an_unknown_mode_twice_and_fit_are_each_one_sentence_and_change_nothing(tiny_model):
    model = tiny_model("gcnn")
    weights = [np.asarray(w).copy() for w in model.weights]
    for mode in ("int4", None, "INT8"):
        with pytest.raises(ValueError, match=r"^Unknown quantization mode .*; the zoo's models quantize to 'int8'"):
            model.quantize(mode)
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(weights, model.weights))
    model.quantize("int8")
    quantized = [np.asarray(w).copy() for w in model.weights]
    with pytest.raises(ValueError, match=r"^This model is already quantized to int8; quantize a float32 model once"):
        model.quantize("int8")
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(quantized, model.weights))
    model.compile()
    with pytest.raises(RuntimeError, match=r"^This model's weights are int8 \(model.quantize\), which have no gradient"):
        model.fit(np.zeros((2, 4), np.int32), np.zeros((2, 4), np.int32), verbose=0)
