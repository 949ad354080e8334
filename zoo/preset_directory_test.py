"""`zoo.preset_directory`: where a loaded model's tokenizer comes from (`resolve_tokenizer`, one
test per source), and `load_model`, `zoo.load`'s last step."""

import os

import numpy as np
import pytest

import zoo
from zoo import preset_directory, registry
from zoo.data import CharTokenizer, WordTokenizer, ptb_tokenizer

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
    assert tokenizer == ptb_tokenizer() and len(tokenizer) == 10_002
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


def _tree(root):
    """{relative path: bytes} of every file under `root`."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


@pytest.mark.parametrize("where", ["other_files", "cwd", "user_config"])
def test_saving_over_a_directory_of_other_files_is_refused_and_changes_nothing(tmp_path, monkeypatch, where):
    """Before, `save_to_preset` replaced whatever directory was there: a project folder's files
    (saving to ".") were deleted."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('mine')\n")
    (project / "notes.txt").write_text("notes\n")
    if where == "user_config":  # a config.json that is no preset's: it would be overwritten
        (project / "config.json").write_text('{"learning_rate": 0.1}\n')
    before = _tree(tmp_path)
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    target = "." if where == "cwd" else str(project)
    monkeypatch.chdir(project)
    with pytest.raises(ValueError, match=r"^Cannot save a preset directory at .*project: it already holds files that "
                                         r"are not a preset \((config\.json, )?notes\.txt, src\).*an earlier preset "
                                         r"directory to replace\.$"):
        model.save_to_preset(target)
    assert _tree(tmp_path) == before


def test_a_file_path_is_refused_in_one_sentence(tmp_path):
    (tmp_path / "afile").write_text("x")
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    with pytest.raises(ValueError, match=r"^Cannot save a preset directory at .*afile: it is a file\. Give a new"):
        model.save_to_preset(str(tmp_path / "afile"))
    with pytest.raises(ValueError, match=r"^Cannot save a preset directory at .*afile/sub: "):
        model.save_to_preset(str(tmp_path / "afile" / "sub"))
    assert sorted(os.listdir(tmp_path)) == ["afile"] and (tmp_path / "afile").read_text() == "x"


def test_saving_over_a_preset_replaces_its_files_and_keeps_the_others(tmp_path, monkeypatch):
    """An earlier preset's files are replaced (a word tokenizer's vocabulary.txt goes when the new
    model has none); other files beside them, and a sibling `NAME.old` of the user's, stay; an
    empty directory, the current one included, takes a preset."""
    word = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + WORDS)
    directory = tiny_directory(tmp_path / "my_lm", word)
    (tmp_path / "my_lm" / "README.md").write_text("my model\n")
    (tmp_path / "my_lm.old").mkdir()
    (tmp_path / "my_lm.old" / "precious.txt").write_text("keep\n")
    other = zoo.load("gcnn-ptb", weights="random", **{**TINY, "embedding_dim": 4})
    assert other.save_to_preset(directory) == directory
    assert sorted(os.listdir(directory)) == ["README.md", "config.json", "model.weights.h5"]
    assert (tmp_path / "my_lm.old" / "precious.txt").read_text() == "keep\n"
    assert zoo.load(directory).get_config()["embedding_dim"] == 4 and zoo.load(directory).tokenizer is None
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    assert other.save_to_preset(".") == str(tmp_path / "empty")
    assert sorted(os.listdir(".")) == ["config.json", "model.weights.h5"]  # the working directory still works


def test_a_failure_while_replacing_leaves_the_earlier_preset_as_it_was(tmp_path, monkeypatch):
    word = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + WORDS)
    directory = tiny_directory(tmp_path / "my_lm", word)
    before = _tree(tmp_path)
    real, calls = os.rename, []

    def failing(src, dst):  # the second file moved into place fails
        calls.append(dst)
        if ".tmp-preset-" in src and len([c for c in calls if ".old-preset-" not in c]) == 2:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError, match="disk full"):
        zoo.load("gcnn-ptb", weights="random", **{**TINY, "embedding_dim": 4}).save_to_preset(directory)
    monkeypatch.undo()
    assert _tree(tmp_path) == before
    assert not [e for e in os.listdir(directory) if e.startswith(".")]


def test_weights_that_do_not_fit_name_the_first_difference_in_one_sentence(directories, tmp_path):
    """Before: Keras' dump of every object it could not load ("expected 3 variables, but received
    0"), wrong for a shape that differs; a text file was "File format not supported"."""
    directory, _ = directories["none"]
    with pytest.raises(ValueError, match=r"do not fit this model's config: its blocks/residual_block/convs/"
                                         r"gated_conv1d/vars/0 has shape \(3, 8, 16\), the model's \(3, 16, 16\) \(4 more "
                                         r"differences\); load them with the config they were saved with"):
        zoo.load("gcnn-ptb", weights=directory, **{**TINY, "embedding_dim": 16})
    with pytest.raises(ValueError, match=r"do not fit this model's config: it has no blocks/residual_block_1/convs/"
                                         r"gated_conv1d/vars/0 \(shape \(3, 8, 16\) in the model\) \(2 more"):
        zoo.load("gcnn-ptb", weights=directory, **{**TINY, "blocks": [[[3, 8]], [[3, 8]]]})
    text = tmp_path / "notes.txt"
    text.write_text("not weights\n")
    with pytest.raises(ValueError, match=r"notes\.txt' is not a weights file: expected a \.weights\.h5 file"):
        zoo.load("gcnn-ptb", weights=str(text), **TINY)
    with pytest.raises(ValueError, match=r"No weights at 'Trained'.*lower case: \"trained\" or \"random\""):
        zoo.load("gcnn-ptb", weights="Trained")
    with pytest.raises(ValueError, match=r"config\.json' is a file; zoo\.load takes a preset name or a preset "
                                         r"directory \(here perhaps '.*none'\)"):
        zoo.load(os.path.join(directory, "config.json"))
    with pytest.raises(ValueError, match=r"^vocabulary_size must be an integer >= 1, got '10'\.$"):
        zoo.load("gcnn-ptb", weights="random", **{**TINY, "vocabulary_size": "10"})


def test_odd_targets_are_refused_in_one_sentence_and_an_interrupted_preset_is_replaced(tmp_path):
    """From a review: a keras-hub preset (config.json with a class_name) was taken for the zoo's
    and its weights replaced; a preset cut short (config.json gone) was refused for good; a folder
    named like a preset file and a broken link gave raw OSErrors."""
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "config.json").write_text('{"module": "keras_hub", "class_name": "GemmaBackbone", "config": {}}')
    (hub / "model.weights.h5").write_bytes(b"hub weights")
    (hub / "metadata.json").write_text("{}")
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"hub: it already holds files that are not a preset \(config\.json, "
                                         r"metadata\.json, model\.weights\.h5\)"):
        model.save_to_preset(str(hub))
    folder = tmp_path / "folder"
    (folder / "vocabulary.txt").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"folder: its vocabulary\.txt is not a file, and saving would replace it"):
        model.save_to_preset(str(folder))
    os.symlink(tmp_path / "nowhere", tmp_path / "link")
    with pytest.raises(ValueError, match=r"link: it is a file\. Give a new or empty directory"):
        model.save_to_preset(str(tmp_path / "link"))
    os.unlink(tmp_path / "link")
    assert _tree(tmp_path) == before
    cut = tmp_path / "cut"  # an earlier save stopped after config.json was moved aside
    model.save_to_preset(str(cut))
    os.unlink(cut / "config.json")
    assert model.save_to_preset(str(cut)) == str(cut) and zoo.load(str(cut)).get_config()["embedding_dim"] == 8


def test_a_preset_whose_expert_count_differs_from_its_config_names_both_and_changes_nothing(tiny_model, tmp_path):
    import json

    model = tiny_model("gcnn", blocks=[[[3, 8]], [[2, 8]]],
                       moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8})
    folder = tmp_path / "moe"
    model.save_to_preset(str(folder))
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["config"]["moe"]["num_experts"] = 6
    config_path.write_text(json.dumps(config))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(ValueError, match=r"the weights hold 4 experts in a mixture-of-experts layer .*, the config 6 "
                                         r"\(num_experts\)"):
        zoo.load(str(folder))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
