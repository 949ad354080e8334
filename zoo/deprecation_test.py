"""Every former name kept for a release by `zoo.deprecation`: it warns naming the new spelling
and then gives what the new one gives; an unknown name is still an `AttributeError`."""

import importlib

import pytest

from zoo import deprecation

# (module, former name, the new spelling the warning names, module and name of the object it gives)
FORMER = [
    ("zoo.data", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data.vocab", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data.vocab", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data.tokenizers", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data.tokenizers", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data.vocab", "load_vocabulary", "zoo.data.tokenizers.load_tokenizer", "zoo.data.vocab", "load_word_or_char"),
    ("zoo.metrics", "Perplexity", "zoo.metrics.PerplexityMetric", "zoo.metrics", "PerplexityMetric"),
    ("zoo.data.graph_tokenizers", "normalize_subword", "zoo.data.graph_tokenizers.normalize_subword_in_graph",
     "zoo.data.graph_tokenizers", "normalize_subword_in_graph"),
]


@pytest.mark.parametrize("module, old, new, home, name", FORMER)
def test_a_former_name_warns_naming_the_new_one_and_gives_the_same_object(module, old, new, home, name):
    with pytest.warns(DeprecationWarning, match=f"^{module}.{old} is deprecated; use {new}.$".replace(".", r"\.")):
        value = getattr(importlib.import_module(module), old)
    assert value is getattr(importlib.import_module(home), name)


def test_from_import_of_a_former_name_warns_and_works(tmp_path):
    with pytest.warns(DeprecationWarning, match=r"zoo\.data\.Vocabulary is deprecated; use zoo\.data\.WordTokenizer"):
        from zoo.data import Vocabulary
    tokenizer = Vocabulary.build(["a b a"])
    assert tokenizer.tokens[4:] == ["a", "b"]
    tokenizer.save(str(tmp_path))
    with pytest.warns(DeprecationWarning, match=r"zoo\.data\.vocab\.load_vocabulary is deprecated"):
        from zoo.data.vocab import load_vocabulary
    assert load_vocabulary(str(tmp_path)) == tokenizer


def test_an_unknown_name_is_still_an_attribute_error():
    import zoo.data

    with pytest.raises(AttributeError, match="^module 'zoo.data' has no attribute 'Vocab'$"):
        zoo.data.Vocab  # noqa: B018
    with pytest.raises(AttributeError):
        deprecation.former_name("m", "x", {})


def test_the_former_metric_name_is_what_keras_serialises():
    import keras

    from zoo.metrics import PerplexityMetric

    assert keras.saving.get_registered_name(PerplexityMetric) == "zoo>Perplexity"
    assert keras.saving.get_registered_object("zoo>Perplexity") is PerplexityMetric
