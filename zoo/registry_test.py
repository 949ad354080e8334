"""`zoo.registry`: the walk of `zoo.load` through the modules, the preset's `tokenizer` field (and
its former name `vocabulary`), a loaded model's `tokenizer` (and its former name), and what `zoo.load`
refuses: an unknown preset (naming the closest), a missing directory, an unknown config key."""

import sys

import pytest

import zoo
from zoo import registry
from zoo.data import WordTokenizer
from zoo.models import GCNNLanguageModel

TINY = {"vocabulary_size": 50, "embedding_dim": 8, "blocks": [[[3, 8]]]}
WORDS = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)])


def modules_load_calls(*args, **kwargs):
    """The zoo modules of the functions `zoo.load(*args, **kwargs)` calls itself, in order (its
    own module's helpers included; what they call in turn, and code outside the zoo, left out)."""
    entered = []

    def profile(frame, event, arg):
        caller = frame.f_back
        if (event == "call" and caller is not None and caller.f_code is registry.load.__code__
                and not frame.f_code.co_name.startswith("<")):
            module = frame.f_globals.get("__name__", "")
            if module == "zoo" or module.startswith("zoo."):
                entered.append(module)

    sys.setprofile(profile)
    try:
        model = zoo.load(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return entered, model


def test_load_enters_each_module_once(tmp_path):
    walk = ["zoo.registry", "zoo.weights", "zoo.preset_directory"]  # docs/architecture.md
    entered, model = modules_load_calls("gcnn-ptb", weights="random", **TINY)
    assert entered == walk and model.built
    model.tokenizer = WORDS
    directory = model.save_to_preset(str(tmp_path / "preset"))
    entered, model = modules_load_calls(directory)
    assert entered == walk and model.tokenizer == WORDS
    entered, model = modules_load_calls("gcnn-ptb", weights=directory, **TINY)
    assert entered == walk and model.tokenizer == WORDS


def test_a_presets_tokenizer_field_names_its_kind():
    assert registry.get_preset("gcnn-ptb").tokenizer == "ptb"
    assert registry.get_preset("gcnn-en").tokenizer == "subword"
    assert registry.get_preset("gcnn-14").tokenizer == "word"  # the default
    assert list(registry.TOKENIZERS) == ["ptb", "word", "char", "subword"]


def test_the_former_vocabulary_field_still_registers_and_warns():
    spec = {"description": "x", "config": {}, "vocabulary": "char"}
    with pytest.warns(DeprecationWarning, match=r"preset field 'vocabulary' \(in Preset 'registry-test-old' of "
                                                r"GCNNLanguageModel\) is deprecated; use 'tokenizer'"):
        [preset] = registry.register_presets({"registry-test-old": spec}, GCNNLanguageModel)
    try:
        assert preset.tokenizer == "char" and preset.token_kind == "char"
        with pytest.warns(DeprecationWarning, match=r"Preset\.vocabulary is deprecated; use Preset\.tokenizer"):
            assert preset.vocabulary == "char"
    finally:
        del registry.PRESETS["registry-test-old"]


@pytest.mark.parametrize("spec, message", [
    ({"description": "x", "config": {}, "tokenizer": "bytes"},
     "Preset 'registry-test-bad' of GCNNLanguageModel has tokenizer 'bytes'; expected one of "
     "['ptb', 'word', 'char', 'subword']."),
    ({"description": "x", "config": {}, "vocabulary": "bytes"},
     "Preset 'registry-test-bad' of GCNNLanguageModel has vocabulary 'bytes'; expected one of "
     "['ptb', 'word', 'char', 'subword']."),
    ({"description": "x", "config": {}, "vocabulary": "word", "tokenizer": "word"},
     "Preset 'registry-test-bad' of GCNNLanguageModel has both 'tokenizer' and its former name "
     "'vocabulary'; keep 'tokenizer'."),
])
@pytest.mark.filterwarnings("ignore::zoo.deprecation.ZooDeprecationWarning")  # the former field, refused
def test_a_bad_tokenizer_field_is_refused_in_one_sentence(spec, message):
    with pytest.raises(ValueError) as error:
        registry.register_presets({"registry-test-bad": spec}, GCNNLanguageModel)
    assert str(error.value) == message
    assert "registry-test-bad" not in registry.PRESETS


def test_register_presets_refuses_other_shapes_of_its_arguments_in_one_sentence():
    """Before, an AttributeError: 'str' object has no attribute '__name__'."""
    with pytest.raises(ValueError, match=r"^register_presets takes the model family's class .*got 'GCNNLanguageModel'\.$"):
        registry.register_presets({"registry-test-bad": {"description": "x", "config": {}}}, "GCNNLanguageModel")
    with pytest.raises(ValueError, match=r"^register_presets takes a dict of \{name: fields\}, got list\.$"):
        registry.register_presets([("registry-test-bad", {})], GCNNLanguageModel)
    assert "registry-test-bad" not in registry.PRESETS


def test_the_former_registry_names_warn_and_still_work():
    with pytest.warns(DeprecationWarning, match=r"zoo\.registry\.VOCABULARIES is deprecated; use zoo\.registry\.TOKENIZERS"):
        assert registry.VOCABULARIES is registry.TOKENIZERS
    preset = registry.get_preset("gcnn-ptb")
    with pytest.warns(DeprecationWarning, match=r"zoo\.registry\.default_vocabulary is deprecated; use "
                                                r"zoo\.preset_directory\.resolve_tokenizer"):
        default = registry.default_vocabulary(preset, 10_002)
    assert len(default) == 10_002 and default.kind == "word"
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        registry.no_such_name  # noqa: B018


def test_model_vocabulary_reads_and_sets_the_tokenizer_with_a_warning():
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    assert model.tokenizer is None
    with pytest.warns(DeprecationWarning, match=r"model\.vocabulary is deprecated; use model\.tokenizer"):
        model.vocabulary = WORDS
    assert model.tokenizer is WORDS
    with pytest.warns(DeprecationWarning, match=r"model\.vocabulary is deprecated; use model\.tokenizer"):
        assert model.vocabulary is WORDS
    with pytest.warns(DeprecationWarning, match=r"require_vocabulary\(\) is deprecated; use "
                                                r"LanguageModel\.require_tokenizer\(\)"):
        assert model.require_vocabulary() is WORDS
    with pytest.raises(AttributeError, match="has no attribute 'no_such_attribute'"):
        model.no_such_attribute  # noqa: B018


def test_a_model_without_a_tokenizer_is_refused_text_in_one_sentence():
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    with pytest.raises(ValueError, match=r"^This model has no tokenizer: give token ids, or load a preset "
                                         r"directory with one\.$"):
        model.score("w1 w2")


def test_saving_a_model_reads_no_deprecated_attribute(tmp_path, recwarn):
    model = zoo.load("gcnn-ptb", weights="random", **TINY)
    model.tokenizer = WORDS
    zoo.load(model.save_to_preset(str(tmp_path / "preset")))
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning) and "vocabulary" in str(w.message)]



# ---- zoo.load's refusals: an unknown preset, a missing directory, an unknown config key -----------
def test_unknown_preset_names_closest():
    with pytest.raises(ValueError, match=r"Unknown preset 'gcnn-14x'\. Did you mean 'gcnn-14'"):
        zoo.load("gcnn-14x")


def test_missing_preset_directory(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        zoo.load(str(tmp_path / "nowhere"))


def test_unknown_override():
    with pytest.raises(ValueError, match=r"Unknown config key\(s\) \['nonsense_key'\]"):
        zoo.load("gcnn-ptb", nonsense_key=1)


def test_trained_gcnn_en_comes_with_its_fine_tuning_optimizer_and_random_weights_with_the_preset_s():
    pretraining = registry.get_preset("gcnn-en").config["optimizer"]
    spec = registry.fine_tune_optimizer("gcnn-en")
    assert spec == {**pretraining, "learning_rate": pretraining["learning_rate"] / 2}
    lm = zoo.load("gcnn-en", weights="trained")
    assert lm.optimizer_config == spec
    lm.compile()
    assert float(lm.optimizer.learning_rate) == pytest.approx(spec["learning_rate"])  # the schedule's start
    assert zoo.load("gcnn-en", weights="random").optimizer_config == pretraining
    chosen = {"name": "sgd", "learning_rate": 0.1}
    assert zoo.load("gcnn-en", weights="trained", optimizer=chosen).optimizer_config == chosen
    # a preset that names none fine-tunes with its own
    assert registry.fine_tune_optimizer("gcnn-ptb") is None
    assert zoo.load("gcnn-ptb", weights="trained").optimizer_config == registry.get_preset("gcnn-ptb").config["optimizer"]


def test_a_file_named_like_a_preset_in_the_working_directory_does_not_hide_the_preset(tmp_path, monkeypatch):
    """From a review: `zoo.load("gcnn-ptb")` beside a file called gcnn-ptb said it was a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gcnn-ptb").write_text("a log\n")
    assert registry.model_config("gcnn-ptb")[1]["embedding_dim"] == 128


def test_numpy_numbers_as_overrides_are_plain_numbers_in_the_model_and_its_preset(tmp_path):
    """A new user passed `vocabulary_size=np.int64(...)` (a numpy count) and got Keras' "input_dim
    must be a positive integer" from inside the model; config.json cannot hold numpy numbers either."""
    import json

    import numpy as np

    model = zoo.load("gcnn-ptb", weights="random", vocabulary_size=np.int64(50), embedding_dim=np.int32(8),
                     blocks=[[[np.int64(3), 8]]], dropout=np.float32(0.25))
    config = model.get_config()
    assert type(model.vocabulary_size) is int and type(config["embedding_dim"]) is int
    assert config["blocks"] == [[[3, 8]]] and type(config["blocks"][0][0][0]) is int
    assert config["dropout"] == 0.25 and type(config["dropout"]) is float
    model.save_to_preset(str(tmp_path / "lm"))
    saved = json.loads((tmp_path / "lm" / "config.json").read_text())["config"]
    assert (saved["vocabulary_size"], saved["embedding_dim"], saved["blocks"]) == (50, 8, [[[3, 8]]])
    with pytest.raises(ValueError, match=r"^vocabulary_size must be an integer >= 1, got array\(\[50\]\)\.$"):
        zoo.load("gcnn-ptb", weights="random", vocabulary_size=np.array([50]), embedding_dim=8, blocks=[[[3, 8]]])
