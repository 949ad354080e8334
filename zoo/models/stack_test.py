"""The stack models (LSTM / Elman RNN / MoE / feed-forward), the MoE presets and the recurrent
models of the introduction."""

import json
import os

import h5py
import keras
import numpy as np
import pytest

import zoo
from zoo import weights as sources
from zoo.export.state import StateLayout
from zoo.models.stack import StackLanguageModel
from zoo.registry import PRESETS, count_params

from tests.model_checks import MOE_PTB, TABLE_7, assert_causal

V = 10_002  # the treebank's vocabulary


def lstm_params(inputs, units, projection=None):
    """Keras' LSTM: four gates, each inputs×units + out×units + units (out: the projection's
    width, or units), plus the projection units×projection."""
    out = projection or units
    return 4 * (inputs * units + out * units + units) + (units * projection if projection else 0)


def moe_params(dim, experts, hidden):
    """`experts` feed-forward experts dim→hidden→dim with biases, and the gate's and the noise's
    dim×experts matrices (Shazeer et al. eq. 3-5)."""
    return experts * (dim * hidden + hidden + hidden * dim + dim) + 2 * dim * experts


# The treebank's presets counted from their shapes (stack_presets.py, gcnn_presets.py): embedding
# V×d, the middle layers, a full softmax d×V + V.
EXPECTED_COUNTS = {
    "lstm-moe-ptb": V * 256 + 2 * lstm_params(256, 256) + moe_params(256, 32, 256) + 256 * V + V,
    "lstm-wide-ptb": V * 256 + 2 * lstm_params(256, 256) + (256 * 1024 + 1024 + 1024 * 256 + 256) + 256 * V + V,
    # four GLU blocks [4, 128]: kernel 4×128×(2·128), weight norm g and bias 2·128 each; the MoE after block 1
    "gcnn-moe-ptb": V * 128 + 4 * (4 * 128 * 256 + 2 * 256) + moe_params(128, 32, 128) + 128 * V + V,
    "lstmp-ptb": V * 128 + lstm_params(128, 512, projection=128) + 128 * V + V,
}


def scaled(spec, dim=16):
    """The same stack at width 16: experts capped at 32 (groups kept when they divide), hidden 8."""
    spec = dict(spec)
    if spec["type"] == "lstm":
        spec["units"] = dim * (2 if spec.get("projection") else 1)
        if spec.get("projection"):
            spec["projection"] = dim
    elif spec["type"] == "moe":
        spec["num_experts"] = min(spec["num_experts"], 32)
        spec["hidden_units"] = 8
        if spec.get("groups"):
            spec["groups"] = 4
    else:
        spec["hidden_units"] = [8] * len(spec["hidden_units"])
    return spec


@pytest.mark.parametrize("name", TABLE_7)
def test_table_7_presets_are_causal_at_small_width(name):
    config = PRESETS[name].config
    layers = [scaled(s) for s in config["layers"]]
    model = zoo.load(name, vocabulary_size=50, embedding_dim=16, layers=layers, cutoffs=[10, 20])
    assert [s["type"] for s in model.layer_specs] == [s["type"] for s in config["layers"]]
    assert_causal(model)


@pytest.mark.parametrize("name", MOE_PTB)
def test_moe_ptb_presets_are_causal_and_counted(name):
    model = zoo.load(name)
    assert_causal(model)
    assert model.count_params() == count_params(name) == EXPECTED_COUNTS[name]


# Every kind of stack layer at width 16: projected LSTM, hierarchical MoE, feed-forward, LSTM.
MIXED = {"embedding_dim": 16, "residual": True,
         "layers": [{"type": "lstm", "units": 24, "projection": 16},
                    {"type": "moe", "num_experts": 8, "k": 2, "hidden_units": 8, "groups": 2},
                    {"type": "ffn", "hidden_units": [12, 12]},
                    {"type": "lstm", "units": 16}]}


def test_decode_step_matches_log_probs_through_moe_and_projected_lstm(tiny_model):
    model = tiny_model("moe", **MIXED, cutoffs=[10, 30])
    ids = np.random.default_rng(1).integers(0, 50, size=(2, 40))
    full = model.log_probs(ids)
    state, steps = None, []
    for t in range(ids.shape[1]):
        log_probs, state = model.decode_step(ids[:, t], state)
        steps.append(log_probs.numpy())
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)


def test_parameter_count_and_preset_round_trip(tiny_model, tmp_path):
    model = tiny_model("moe", **MIXED)
    config = model.get_config()
    # LSTMP 16→24→16: 4·(16·24 + 16·24 + 24) + 24·16; MoE: 8 experts 16→8→16 and two gate levels;
    # ffn 16→12→12→16; LSTM 16: 4·(16·16 + 16·16 + 16); full softmax 16→50.
    lstmp = 4 * (16 * 24 + 16 * 24 + 24) + 24 * 16
    moe = 8 * (16 * 8 + 8 + 8 * 16 + 16) + 2 * (16 * 2 + 2 * 16 * 4)
    ffn = (16 * 12 + 12) + (12 * 12 + 12) + (12 * 16 + 16)
    lstm = 4 * (16 * 16 + 16 * 16 + 16)
    expected = 50 * 16 + lstmp + moe + ffn + lstm + (16 * 50 + 50)
    assert model.count_params() == count_params("lstm-moe-ptb", **config) == expected
    ids = np.random.default_rng(2).integers(0, 50, size=(3, 11))
    model.save_to_preset(str(tmp_path / "p"))
    again = zoo.load(str(tmp_path / "p"))
    np.testing.assert_array_equal(again.log_probs(ids), model.log_probs(ids))


@pytest.mark.ci
def test_moe_metrics_show_in_fit_logs_and_aux_losses_enter_the_loss(tiny_model):
    model = tiny_model("moe", **MIXED)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    x = np.random.default_rng(3).integers(0, 50, size=(8, 12))
    history = model.fit(x, np.roll(x, -1, axis=1), epochs=1, verbose=0).history
    names = set(history)
    assert {"moe_1_cv_importance", "moe_1_cv_load", "moe_1_max_load_ratio", "perplexity"} <= names
    # the loss is the NLL plus the MoE's balancing losses: larger than log(perplexity)
    assert history["loss"][0] > np.log(history["perplexity"][0])


def test_bad_stack_specs_raise():
    with pytest.raises(ValueError, match="'type' one of"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "gru", "units": 8}])
    with pytest.raises(ValueError, match="non-empty list"):
        StackLanguageModel(vocabulary_size=50, layers=[])
    with pytest.raises(ValueError, match="Only an LSTM layer takes a projection"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "rnn", "units": 8, "projection": 4}])
    with pytest.raises(ValueError, match=r"^dropout must be a rate in \[0, 1\), got 'x'\.$"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "rnn", "units": 8}], dropout="x")
    with pytest.raises(ValueError, match=r"^embedding_dim must be an integer >= 1, got 'big'\.$"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "rnn", "units": 8}], embedding_dim="big")
    with pytest.raises(ValueError, match="residual must be True or False"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "rnn", "units": 8}], residual=0)
    with pytest.raises(ValueError, match="after_blocks"):
        zoo.load("gcnn-moe-ptb", moe={"after_blocks": [9], "num_experts": 4, "k": 2, "hidden_units": 8})
    # what `zoo train --set layers=[...]` passes: one sentence naming the spec, not a KeyError
    with pytest.raises(ValueError, match="A lstm layer needs its 'units'"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "lstm"}])
    with pytest.raises(ValueError, match=r"units of .* must be an integer >= 1, got 0"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "rnn", "units": 0}])
    with pytest.raises(ValueError, match=r"projection of .* must be an integer >= 1, got 0"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "lstm", "units": 8, "projection": 0}])
    with pytest.raises(ValueError, match="hidden_units must be a list of widths"):
        StackLanguageModel(vocabulary_size=50, layers=[{"type": "ffn", "hidden_units": 8}])


# ---- the recurrent models of the introduction: no residual, and the former family's directories ----
FORMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "former_recurrent")


@pytest.mark.parametrize("cell", ["lstm", "rnn"])
def test_preset_directories_of_the_former_recurrent_family_load_with_their_numbers(cell):
    model = zoo.load(os.path.join(FORMER, cell))
    assert type(model) is StackLanguageModel and not model.residual
    assert [s["type"] for s in model.layer_specs] == [cell, cell] and model.stream_context == 7
    assert model.tokenizer.tokens[4:6] == ["the", "a"]
    ids = np.load(os.path.join(FORMER, "ids.npy"))
    # to float32 rounding: the recurrent kernels' summation order differs between CPUs (an
    # AMD host differs from the Intel one that wrote the file by 1 ulp in a few entries)
    np.testing.assert_allclose(model.log_probs(ids), np.load(os.path.join(FORMER, f"{cell}_log_probs.npy")),
                               rtol=1e-6, atol=0)
    names = {"lstm": ["state_lstm_0_h", "state_lstm_0_c", "state_lstm_1_h", "state_lstm_1_c"],
             "rnn": ["state_rnn_0_h", "state_rnn_1_h"]}[cell]
    assert list(StateLayout(model).specs) == names


def test_a_directory_naming_an_unknown_family_is_refused(tmp_path):
    directory = zoo.load(os.path.join(FORMER, "rnn")).save_to_preset(str(tmp_path / "p"))
    config = json.load(open(os.path.join(directory, "config.json")))
    assert config["class_name"] == "StackLanguageModel" and config["config"]["residual"] is False
    json.dump(dict(config, class_name="GRULanguageModel"), open(os.path.join(directory, "config.json"), "w"))
    with pytest.raises(ValueError, match="'GRULanguageModel', which is not a registered model family"):
        zoo.load(directory)


@pytest.mark.parametrize("residual", [False, True])
def test_residual_adds_each_layer_s_input_where_the_widths_agree(tiny_model, residual):
    model = tiny_model("rnn", residual=residual, layers=[{"type": "rnn", "units": 8}, {"type": "lstm", "units": 6}])
    ids = np.random.default_rng(4).integers(0, 50, size=(2, 5))
    x = model.embedding(ids)
    h = model.stack[0](x)[0]
    if residual:
        h = h + x  # same width: C.1's residual connection
    h = model.stack[1](h)[0]  # 8 → 6: no residual whatever the switch
    np.testing.assert_allclose(model(ids).numpy(), h.numpy(), atol=1e-6)


def test_the_shipped_lstmp_weights_load_into_the_stack_unchanged():
    model = zoo.load("lstmp-ptb", weights="trained")
    path = os.path.join(sources.PACKAGE_DIR, sources.TRAINED["lstmp-ptb"].path)
    stored = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: stored.append(item[()]) if isinstance(item, h5py.Dataset) else None)

    def key(array):
        return array.shape, np.asarray(array, np.float32).tobytes()

    assert sorted(map(key, stored)) == sorted(map(key, model.get_weights()))
