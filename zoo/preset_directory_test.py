"""`zoo.preset_directory`: where a loaded model's tokenizer comes from (`resolve_tokenizer`, one
test per source), and `load_model`, `zoo.load`'s last step."""

import os

import numpy as np
import pytest

import zoo
from zoo import preset_directory, registry
from zoo.data import CharTokenizer, WordTokenizer, ptb_vocabulary

TINY = {"vocabulary_size": 50, "embedding_dim": 8, "blocks": [[[3, 8]]]}
WORDS = [f"w{i}" for i in range(46)]


def tiny_directory(path, tokenizer):
    """A tiny gcnn-ptb preset directory holding `tokenizer` (None: no tokenizer files)."""
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    model.tokenizer = tokenizer
    return model.save_to_preset(str(path))


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
    """Three tiny preset directories: a word tokenizer, a character one, and none."""
    root = tmp_path_factory.mktemp("presets")
    word = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + WORDS)
    char = CharTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + WORDS)
    return {"word": (tiny_directory(root / "word", word), word),
            "char": (tiny_directory(root / "char", char), char),
            "none": (tiny_directory(root / "none", None), None)}


def test_the_preset_default_is_the_treebanks_tokenizer_for_gcnn_ptb():
    preset = registry.get_preset("gcnn-ptb")
    assert preset.tokenizer == "ptb"
    tokenizer = preset_directory.resolve_tokenizer(preset, preset.config["vocabulary_size"])
    assert tokenizer == ptb_vocabulary() and len(tokenizer) == 10_002
    # an overridden size no longer fits the treebank's ids: no default
    assert preset_directory.resolve_tokenizer(preset, 50) is None


def test_the_preset_directory_brings_its_tokenizer(directories):
    directory, word = directories["word"]
    assert preset_directory.resolve_tokenizer(directory=directory) == word
    loaded = zoo.load(directory, weights="random")
    assert type(loaded.tokenizer) is WordTokenizer and loaded.tokenizer == word


def test_the_weights_directory_comes_first(directories):
    (word_dir, word), (char_dir, char) = directories["word"], directories["char"]
    preset = registry.get_preset("gcnn-ptb")
    # ahead of the directory being loaded and of the preset's default
    assert preset_directory.resolve_tokenizer(preset, 10_002, word_dir, char_dir) == char
    loaded = zoo.load(word_dir, weights=char_dir)
    assert type(loaded.tokenizer) is CharTokenizer and loaded.tokenizer == char
    # a weights directory without a tokenizer leaves the loaded directory's
    assert zoo.load(word_dir, weights=directories["none"][0]).tokenizer == word
    # a preset name given a preset directory as weights takes that directory's tokenizer
    assert zoo.load("gcnn-ptb", weights=char_dir, **TINY).tokenizer == char


def test_none_when_no_source_has_one(directories):
    assert preset_directory.resolve_tokenizer() is None
    assert preset_directory.resolve_tokenizer(directory=directories["none"][0]) is None
    assert preset_directory.resolve_tokenizer(registry.get_preset("gcnn-14"), 793_471) is None  # a "word" preset
    assert zoo.load(directories["none"][0]).tokenizer is None
    assert zoo.load("gcnn-ptb", weights="random", **TINY).tokenizer is None


def test_a_corrupt_tokenizer_file_is_refused_in_one_sentence(tmp_path, directories):
    directory = tmp_path / "broken"
    directory.mkdir()
    (directory / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError) as error:
        preset_directory.resolve_tokenizer(directory=str(directory))
    message = str(error.value)
    assert message.startswith(f"The tokenizer file {directory / 'tokenizer.json'} is not readable JSON")
    assert "\n" not in message and message.endswith(".")


def test_load_model_builds_and_fills_in_the_saved_weights(directories):
    directory, word = directories["word"]
    cls, config = registry.model_config(directory)
    fresh = preset_directory.load_model(cls, config)
    assert fresh.built and fresh.tokenizer is None
    model = preset_directory.load_model(cls, config, directory, directory=directory)
    saved = zoo.load(directory)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved.get_weights()))
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), fresh.get_weights()))
    assert model.tokenizer == word


def test_the_files_written_are_those_of_before(directories):
    """A word tokenizer's preset directory holds vocabulary.txt (one token per line); a
    character one adds vocabulary_kind.txt; no tokenizer, no tokenizer file."""
    word_dir, char_dir, none_dir = (directories[k][0] for k in ("word", "char", "none"))
    assert sorted(os.listdir(word_dir)) == ["config.json", "model.weights.h5", "vocabulary.txt"]
    with open(os.path.join(word_dir, "vocabulary.txt"), "rb") as f:
        assert f.read() == ("\n".join(["<pad>", "<s>", "</s>", "<unk>"] + WORDS) + "\n").encode()
    assert sorted(os.listdir(char_dir)) == ["config.json", "model.weights.h5", "vocabulary.txt",
                                            "vocabulary_kind.txt"]
    with open(os.path.join(char_dir, "vocabulary_kind.txt"), "rb") as f:
        assert f.read() == b"char\n"
    assert sorted(os.listdir(none_dir)) == ["config.json", "model.weights.h5"]


def test_load_vocabulary_is_the_deprecated_spelling_of_resolve_tokenizer(directories):
    directory, word = directories["word"]
    with pytest.warns(DeprecationWarning, match=r"preset_directory\.load_vocabulary is deprecated; use "
                                                r"zoo\.preset_directory\.resolve_tokenizer"):
        assert preset_directory.load_vocabulary(directory) == word
    with pytest.warns(DeprecationWarning):
        assert preset_directory.load_vocabulary(directories["none"][0]) is None
