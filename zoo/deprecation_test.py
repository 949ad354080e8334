"""Every former name kept for a release by `zoo.deprecation`: it warns naming the new spelling
and then gives what the new one gives; an unknown name is still an `AttributeError`; the one
table and CHANGELOG.md agree; a renamed keyword still works and warns."""

import importlib
import os
import re

import pytest

from zoo import deprecation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (module, former name, the new spelling the warning names, module and name of the object it gives)
FORMER = [
    ("zoo.data.vocab", "load_vocabulary", "zoo.data.tokenizers.load_tokenizer", "zoo.data.vocab", "load_word_or_char"),
    ("zoo.preset_directory", "load_vocabulary", "zoo.preset_directory.resolve_tokenizer(directory=)",
     "zoo.preset_directory", "_saved_tokenizer"),
    ("zoo.registry", "VOCABULARIES", "zoo.registry.TOKENIZERS", "zoo.registry", "TOKENIZERS"),
    ("zoo.registry", "default_vocabulary", "zoo.preset_directory.resolve_tokenizer(preset=, vocabulary_size=)",
     "zoo.registry", "_default_tokenizer"),
    ("zoo.data", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data.vocab", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data.vocab", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data.tokenizers", "Vocabulary", "zoo.data.WordTokenizer", "zoo.data", "WordTokenizer"),
    ("zoo.data.tokenizers", "CharacterVocabulary", "zoo.data.CharTokenizer", "zoo.data", "CharTokenizer"),
    ("zoo.data", "build_vocabulary", "zoo.data.build_tokenizer", "zoo.data", "build_tokenizer"),
    ("zoo.data", "ptb_vocabulary", "zoo.data.ptb_tokenizer", "zoo.data", "ptb_tokenizer"),
    ("zoo.data.datasets", "build_vocabulary", "zoo.data.build_tokenizer", "zoo.data", "build_tokenizer"),
    ("zoo.data.datasets", "ptb_vocabulary", "zoo.data.ptb_tokenizer", "zoo.data", "ptb_tokenizer"),
    ("zoo.metrics", "Perplexity", "zoo.metrics.PerplexityMetric", "zoo.metrics", "PerplexityMetric"),
    ("zoo.data.graph_tokenizers", "normalize_subword", "zoo.data.graph_tokenizers.normalize_subword_in_graph",
     "zoo.data.graph_tokenizers", "normalize_subword_in_graph"),
]


@pytest.mark.parametrize("module, old, new, home, name", FORMER)
def test_a_former_name_warns_naming_the_new_one_and_gives_the_same_object(module, old, new, home, name):
    with pytest.warns(DeprecationWarning, match="^" + re.escape(f"{module}.{old} is deprecated; use {new}.") + "$"):
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
        deprecation.former_name("m", "x")


def test_the_one_table_is_the_changelog_s_list_and_every_entry_is_tested():
    assert {f"{m}.{old}" for m, old, *_ in FORMER} == set(deprecation.FORMER_NAMES)
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        rows = [line for line in f if line.startswith("| `")]
    listed = {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}
    assert set(deprecation.FORMER_NAMES) <= listed
    assert all(row.rstrip().endswith(f"| {deprecation.REMOVED_IN} |") for row in rows)
    for module in ("zoo.data.pipeline", "zoo.data.corpus", "zoo.training.data", "zoo.training.trainer"):
        for name, value in vars(importlib.import_module(module)).items():
            renamed = getattr(value, "renamed_keywords", None) or getattr(getattr(value, "from_lines", None),
                                                                          "renamed_keywords", None)
            if renamed and getattr(value, "__module__", module) == module:
                assert any(name in row or "from_lines" in row for row in rows), name


def test_a_renamed_keyword_warns_and_works_and_both_spellings_are_refused():
    from zoo.data import WordTokenizer, stream_dataset
    from zoo.training import load_corpus

    tokenizer = WordTokenizer.build(["a b a"])
    new = next(iter(stream_dataset(["a b"], tokenizer=tokenizer, batch_size=1, seq_len=2)))
    with pytest.warns(deprecation.ZooDeprecationWarning, match=r"^stream_dataset\(vocabulary=\.\.\.\) is deprecated; "
                                                                r"use tokenizer=\.\.\.\.$"):
        old = next(iter(stream_dataset(["a b"], vocabulary=tokenizer, batch_size=1, seq_len=2)))
    assert all((a.numpy() == b.numpy()).all() for a, b in zip(new, old))
    with pytest.raises(TypeError, match=r"stream_dataset\(\) got tokenizer= and its former name vocabulary=; "
                                        r"give tokenizer= only\."):
        stream_dataset(["a b"], tokenizer=tokenizer, vocabulary=tokenizer, batch_size=1, seq_len=2)
    with pytest.warns(deprecation.ZooDeprecationWarning, match=r"load_corpus\(tokenizer='word'\) is deprecated; "
                                                                r"use tokenizer_kind='word'"):
        lines, _, words = load_corpus("ptb", tokenizer="word", max_vocabulary=100, log=lambda m: None)
    assert len(words) == 100 and words.kind == "word"
    with pytest.warns(deprecation.ZooDeprecationWarning) as caught:  # the old call, both former keywords
        _, _, same = load_corpus("ptb", vocabulary=words, tokenizer="word", log=lambda m: None)
    assert same is words and len(caught) == 2 and all(w.filename == __file__ for w in caught)


def test_a_deprecated_name_used_outside_pytest_warns_is_an_error_in_the_zoo_s_tests():
    import zoo.data

    with pytest.raises(deprecation.ZooDeprecationWarning):
        zoo.data.Vocabulary  # noqa: B018  (pytest.ini: the zoo's own code must not use former names)


def test_the_former_metric_name_is_what_keras_serialises():
    import keras

    from zoo.metrics import PerplexityMetric

    assert keras.saving.get_registered_name(PerplexityMetric) == "zoo>Perplexity"
    assert keras.saving.get_registered_object("zoo>Perplexity") is PerplexityMetric
