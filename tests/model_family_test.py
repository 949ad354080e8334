"""A new model family is one class and its presets, with no edit anywhere else.

The family here, a GRU language model, is defined in this file only. Once its class is defined
and its presets registered, everything the zoo's own families get works for it: `zoo.presets()`
and `zoo presets --params`, `zoo.load`, parameter counting, `save_to_preset` / `zoo.load(dir)`,
`decode_step`, and the SavedModel export for TF Serving, loaded in a process that imports only
TensorFlow. The family is defined and registered inside a fixture and removed afterwards, so the
rest of the suite sees the zoo's own presets only.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

import zoo
from zoo import registry
from zoo.data.vocab import SPECIALS, WordTokenizer
from zoo.export import export_saved_model
from zoo.models import LanguageModel
from zoo.models.base import CONTRACT
from zoo.tools.cli import main

WORDS = "the a cat dog sat on mat big small red ran to house is was and".split()
VOCABULARY = WordTokenizer(list(SPECIALS) + WORDS)  # 20 ids
EMBEDDING, UNITS = 8, 16


def define_gru_family():
    """The whole family: this class and the preset dict below, nothing else."""

    class GRULanguageModel(LanguageModel):
        """Embedding → one GRU → output layer."""

        def __init__(self, vocabulary_size, embedding_dim=8, units=16, cutoffs=None, optimizer=None, **kwargs):
            super().__init__(vocabulary_size=vocabulary_size, optimizer=optimizer, **kwargs)
            self.embedding_dim = embedding_dim
            self.units = units
            self.cutoffs = cutoffs
            self.embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")
            self.gru = keras.layers.GRU(units, return_sequences=True, name="gru")
            self.head = self.make_head(cutoffs)
            self.build()

        def build(self, input_shape=None):
            super().build(input_shape)
            self.embedding.build((None, None))
            self.gru.build((None, None, self.embedding_dim))

        @property
        def hidden_dim(self):
            return self.units

        @property
        def stream_context(self):
            return 32

        def call(self, token_ids, training=None):
            return self.gru(self.embedding(token_ids), training=training)

        def initial_state(self, batch_size):
            return [ops.zeros((batch_size, self.units))]

        def step(self, token_ids, state):
            hidden, new_state = self.gru.cell(self.embedding(token_ids), state)
            return hidden, list(new_state)

        def state_name(self, path):
            return f"state_gru_{path[0]}"

        def get_config(self):
            config = super().get_config()
            config.update({"embedding_dim": self.embedding_dim, "units": self.units, "cutoffs": self.cutoffs})
            return config

    presets = {
        "gru-tiny": {
            "description": "A one-layer GRU language model (a test family).",
            "paper": "none: the redesign's example of a new family",
            "config": {"vocabulary_size": len(VOCABULARY), "embedding_dim": EMBEDDING, "units": UNITS,
                       "cutoffs": [6, 12]},
            "train": {"batch_size": 4, "seq_len": 8},
        },
    }
    zoo.register_presets(presets, GRULanguageModel)
    return GRULanguageModel


@pytest.fixture(scope="module")
def family():
    cls = define_gru_family()
    yield cls
    registry.PRESETS.pop("gru-tiny", None)
    registry.FAMILIES.pop("GRULanguageModel", None)


@pytest.fixture(scope="module")
def model(family):
    keras.utils.set_random_seed(3)
    lm = zoo.load("gru-tiny")
    lm.tokenizer = VOCABULARY
    return lm


def expected_parameters(units):
    """By hand from the layers' definitions: embedding 20×8; Keras' GRU (reset_after: two bias
    rows) 3·(8·u + u·u) + 2·3·u; adaptive softmax 6 | 6 | 8 at width u: head u×(6+2) + 8, tail 0
    through width u/4 (u×u/4 + u/4×6), tail 1 through width u/16 (u×u/16 + u/16×8)."""
    return (20 * 8 + 3 * (8 * units + units * units) + 2 * 3 * units + units * 8 + 8
            + units * (units // 4) + (units // 4) * 6 + units * (units // 16) + (units // 16) * 8)


EXPECTED_PARAMETERS = expected_parameters(UNITS)

IDS = np.random.default_rng(0).integers(3, len(VOCABULARY), size=(2, 10))


@pytest.mark.ci
def test_its_presets_are_listed_by_the_api_and_the_command_line(family, capsys):
    assert zoo.presets()["gru-tiny"] == "A one-layer GRU language model (a test family)."
    assert registry.get_preset("gru-tiny").batch_size == 4
    assert main(["presets", "--params"]) == 0
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith("gru-tiny")]
    assert line and line[0].split()[1] == f"{EXPECTED_PARAMETERS:,d}"


def test_load_and_parameter_count_come_from_its_own_layers(family, model):
    assert type(model) is family and model.built
    weights = list(model.weights)
    model.build()  # a built model is not built again (its weights would be added twice)
    assert len(model.weights) == len(weights) and all(a is b for a, b in zip(model.weights, weights))
    assert EXPECTED_PARAMETERS == 1656
    assert model.count_params() == zoo.count_params("gru-tiny") == EXPECTED_PARAMETERS
    assert zoo.count_params("gru-tiny", units=32) == expected_parameters(32) == 4840


def test_save_to_preset_and_load_give_the_same_model(family, model, tmp_path):
    directory = model.save_to_preset(str(tmp_path / "gru"))
    assert json.load(open(os.path.join(directory, "config.json")))["class_name"] == "GRULanguageModel"
    again = zoo.load(directory)
    assert type(again) is family and again.tokenizer == VOCABULARY
    np.testing.assert_array_equal(again.log_probs(IDS), model.log_probs(IDS))


def test_decode_step_gives_what_log_probs_gives(model):
    full = model.log_probs(IDS)
    state, steps = None, []
    for t in range(IDS.shape[1]):
        log_probs, state = model.decode_step(IDS[:, t], state)
        steps.append(np.asarray(log_probs))
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)
    # and it is causal: a later token changes nothing before it
    changed = IDS.copy()
    changed[:, 6] = (changed[:, 6] + 1 - 3) % (len(VOCABULARY) - 3) + 3
    np.testing.assert_array_equal(model.log_probs(changed)[:, :6], full[:, :6])


SERVE = """
import json, sys
import numpy as np
import tensorflow as tf
sigs = tf.saved_model.load(sys.argv[1]).signatures
scores = sigs["serving_default"](text=tf.constant(["the cat sat on the mat", "a dog ran"]))
decode = sigs["decode_step"]
names = sorted(n for n in decode.structured_input_signature[1] if n != "token_ids")
state = {n: tf.zeros([1, 16]) for n in names}
steps = []
for token in [1, 4, 6]:
    r = decode(token_ids=tf.constant([token]), **state)
    steps.append(r["log_probs"].numpy()[0].tolist())
    state = {n: r[n] for n in names}
print(json.dumps({"names": names, "token_log_probs": scores["token_log_probs"].numpy().tolist(),
                  "lengths": scores["lengths"].numpy().tolist(), "steps": steps}))
"""


@pytest.mark.ci
def test_it_exports_for_tf_serving_and_a_tensorflow_only_process_serves_it(model, tmp_path):
    path = export_saved_model(model, str(tmp_path / "exports"), "gru-tiny")
    run = subprocess.run([sys.executable, "-c", SERVE, path], capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="3"))
    assert run.returncode == 0, run.stderr[-2000:]
    served = json.loads(run.stdout.strip().splitlines()[-1])
    assert served["names"] == ["state_gru_0"]  # the family's own state_name
    assert served["lengths"] == [7, 4]
    for row, text in enumerate(["the cat sat on the mat", "a dog ran"]):
        want = model.score([text])[0]
        np.testing.assert_allclose(served["token_log_probs"][row][: len(want)], want, atol=1e-5)
    state, want = None, []
    for token in [1, 4, 6]:
        log_probs, state = model.decode_step([token], state)
        want.append(np.asarray(log_probs)[0])
    np.testing.assert_allclose(np.array(served["steps"]), np.array(want), atol=1e-5)


@pytest.mark.parametrize("spec, message", [
    ({"description": "x", "config": {}, "tokens": "word"}, r"unknown field\(s\) \['tokens'\]"),
    ({"config": {}}, "has no 'description'"),
    ({"description": "x", "config": {"width": 3}}, r"config key\(s\) \['width'\] that GRULanguageModel does not take"),
    ({"description": "x", "config": {}, "vocabulary": "bytes"}, "vocabulary 'bytes'; expected one of"),
    ({"description": "x", "config": {}, "train": {"epochs": 3}}, r"train field\(s\) \['epochs'\]"),
])
@pytest.mark.filterwarnings("ignore::zoo.deprecation.ZooDeprecationWarning")  # the former field, refused
def test_a_bad_preset_is_refused_in_one_sentence(family, spec, message):
    with pytest.raises(ValueError, match=message):
        zoo.register_presets({"gru-bad": spec}, family)
    assert "gru-bad" not in zoo.presets()


def test_a_second_family_of_the_same_name_is_refused(family):
    # The same class imported again is the same family; another class of that name is not.
    body = {name: value for name, value in family.__dict__.items() if name in CONTRACT}
    body.update(__module__="elsewhere", __qualname__="GRULanguageModel")
    with pytest.raises(ValueError, match="A model family named 'GRULanguageModel' is already registered"):
        type("GRULanguageModel", (LanguageModel,), body)
    assert registry.FAMILIES["GRULanguageModel"] is family
