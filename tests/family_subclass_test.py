"""Subclassing a model family: `class ScaledGCNN(GCNNLanguageModel)` overriding `call` alone is a
family of its own. The contract is met by what it inherits, its build runs once whether inherited
or its own, and it registers under its own name beside its parent, so it trains, saves to a
preset directory and loads back as itself."""

import json
import os

import keras
import numpy as np
import pytest
from keras import ops

import zoo
from zoo import registry
from zoo.models import GCNNLanguageModel, LanguageModel

TINY = {"vocabulary_size": 30, "embedding_dim": 8, "blocks": [[[3, 8]], [[2, 8]]]}
IDS = np.random.default_rng(0).integers(3, 30, size=(4, 12))


@pytest.fixture(scope="module")
def families():
    with pytest.warns(UserWarning, match="overrides call but not step") as caught:
        scaled, learned = _define_families()
    # one warning each, when defined, naming the class and the step decoding still uses
    assert [str(w.message).split()[0] for w in caught] == ["ScaledGCNN", "LearnedScaleGCNN"]
    assert all("GCNNLanguageModel.step" in str(w.message) for w in caught)
    yield scaled, learned
    for name in ("ScaledGCNN", "LearnedScaleGCNN"):
        registry.FAMILIES.pop(name, None)


def _define_families():
    class ScaledGCNN(GCNNLanguageModel):
        """The GCNN with its hidden states halved before the output layer."""

        def call(self, token_ids, training=None):
            return 0.5 * super().call(token_ids, training=training)

    class LearnedScaleGCNN(GCNNLanguageModel):
        """The GCNN with a learned scale on its hidden states: its own __init__, build and config."""

        def __init__(self, vocabulary_size, initial_scale=2.0, **kwargs):
            self.initial_scale = initial_scale  # first: the family's __init__ ends by building
            super().__init__(vocabulary_size, **kwargs)

        def build(self, input_shape=None):
            super().build(input_shape)
            self.scale = self.add_weight(name="scale", shape=(), initializer=keras.initializers.Constant(
                self.initial_scale))

        def call(self, token_ids, training=None):
            return self.scale * super().call(token_ids, training=training)

        def get_config(self):
            return {**super().get_config(), "initial_scale": self.initial_scale}

    return ScaledGCNN, LearnedScaleGCNN


def test_a_subclass_overriding_call_is_a_family_registered_beside_its_parent(families):
    scaled, learned = families
    assert registry.FAMILIES["ScaledGCNN"] is scaled and registry.FAMILIES["LearnedScaleGCNN"] is learned
    assert registry.FAMILIES["GCNNLanguageModel"] is GCNNLanguageModel
    assert keras.saving.get_registered_object("zoo>ScaledGCNN") is scaled


def test_its_hidden_states_are_the_parent_s_scaled(families):
    scaled, _ = families
    keras.utils.set_random_seed(0)
    parent = GCNNLanguageModel(**TINY)
    keras.utils.set_random_seed(0)
    child = scaled(**TINY)  # the same layers, so the same initial weights
    np.testing.assert_allclose(child(IDS).numpy(), 0.5 * parent(IDS).numpy(), rtol=1e-6)


@pytest.mark.ci
@pytest.mark.parametrize("which", [0, 1])
def test_it_builds_once_trains_and_comes_back_from_a_preset_directory(families, which, tmp_path):
    family = families[which]
    keras.utils.set_random_seed(0)
    model = family(**TINY)
    weights = list(model.weights)
    model.build()  # built already: no weight added twice, inherited build or its own
    assert [id(w) for w in model.weights] == [id(w) for w in weights]
    assert len(weights) == len(GCNNLanguageModel(**TINY).weights) + which  # + the learned scale
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = [w.numpy().copy() for w in model.weights]
    loss, perplexity = model.train_on_batch(IDS[:, :-1], IDS[:, 1:])
    assert np.isfinite(loss) and perplexity > 1
    assert all(not np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights) if w.trainable)
    directory = model.save_to_preset(str(tmp_path / "preset"))
    assert json.load(open(os.path.join(directory, "config.json")))["class_name"] == family.__name__
    keras.utils.set_random_seed(1)
    again = zoo.load(directory)
    assert type(again) is family
    np.testing.assert_array_equal(again.log_probs(IDS), model.log_probs(IDS))


def test_a_class_still_missing_a_piece_is_refused_naming_it():
    with pytest.raises(TypeError) as refused:
        class Half(LanguageModel):
            def __init__(self, vocabulary_size, **kwargs):
                super().__init__(vocabulary_size, **kwargs)

            def call(self, token_ids, training=None):
                return token_ids

    missing = str(refused.value).split(" does not define ")[1].split(":")[0].split(", ")
    assert missing == ["build", "hidden_dim", "stream_context", "initial_state", "step", "get_config"]
    assert "Half" not in registry.FAMILIES


def test_language_model_s_own_build_is_not_a_family_s(families):
    """A direct subclass of LanguageModel inherits `build` and `get_config` from it, which do not
    count: they build only the output layer and record only the base arguments."""
    with pytest.raises(TypeError, match="does not define build, .*get_config"):
        class NoBuild(LanguageModel):
            hidden_dim = stream_context = 8

            def __init__(self, vocabulary_size, **kwargs):
                super().__init__(vocabulary_size, **kwargs)

            def call(self, token_ids, training=None):
                return ops.zeros((1, 1, 8))

            def initial_state(self, batch_size):
                return []

            def step(self, token_ids, state):
                return ops.zeros((1, 8)), state
