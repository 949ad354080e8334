"""The model a subcommand loads: a preset directory, or a preset whose trained weights ship."""

import pytest

from zoo import weights
from zoo.tools.cli.loading import load_model


def test_a_preset_directory_loads_as_saved(tiny_model, word_tokenizer, tmp_path):
    model = tiny_model("lstm", tokenizer=word_tokenizer)
    model.save_to_preset(str(tmp_path / "run"))
    loaded = load_model(str(tmp_path / "run"))
    assert type(loaded) is type(model) and loaded.vocabulary_size == len(word_tokenizer)
    assert [w.numpy().tolist() for w in loaded.weights] == [w.numpy().tolist() for w in model.weights]


def test_a_missing_directory_names_it_and_the_presets_with_trained_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "TRAINED", {"gcnn-zz": None, "aa-ptb": None})
    with pytest.raises(ValueError, match=r"'nowhere' does not exist; .* trained weights \(aa-ptb, gcnn-zz\)"):
        load_model("nowhere")
    monkeypatch.setattr(weights, "TRAINED", {})
    with pytest.raises(ValueError, match=r"\(none ship yet\)"):
        load_model("nowhere")


def test_a_preset_without_weights_and_a_misspelt_one_are_told_so():
    """Before, both were told only "The preset directory … does not exist"."""
    with pytest.raises(ValueError, match=r"^No trained weights ship for the preset 'lstm-ptb'; give a preset directory "
                                         r"\(train one with `zoo train --preset lstm-ptb`\) or a preset with trained "
                                         r"weights \(gcnn-en, gcnn-moe-en, gcnn-ptb, gcnn-ptb-deep, lstmp-ptb\)\.$"):
        load_model("lstm-ptb")
    with pytest.raises(ValueError, match=r"'gcnn-pbt' does not exist; .*\. Did you mean 'gcnn-ptb'\?$"):
        load_model("gcnn-pbt")
