"""Former names kept for one release: using one warns (`ZooDeprecationWarning`, a
`DeprecationWarning`) naming its new spelling, and then does what the new one does.

`FORMER_NAMES` is the one table of the former names of module attributes; a module that had one
hands its `__getattr__` to `former_name`:

    def __getattr__(name):
        return former_name(__name__, name)

A function whose keyword was renamed takes `@renamed_keywords(old="new")`. CHANGELOG.md lists
every rename, these and the others (attributes of a model, preset fields), with the release that
removes the former name (`REMOVED_IN`). This module imports nothing of the zoo, so that every
package (layers/ included) can warn through it.
"""

import functools
import importlib
import warnings

REMOVED_IN = "0.2.0"  # the release that removes every former name below


class ZooDeprecationWarning(DeprecationWarning):
    """A former name of the zoo was used (the zoo's own tests turn it into an error: pytest.ini)."""


# "module.former name" -> (the new spelling the warning names, "module:attribute" of what it gives)
FORMER_NAMES = {
    "zoo.data.Vocabulary": ("zoo.data.WordTokenizer", "zoo.data.vocab:WordTokenizer"),
    "zoo.data.CharacterVocabulary": ("zoo.data.CharTokenizer", "zoo.data.vocab:CharTokenizer"),
    "zoo.data.vocab.Vocabulary": ("zoo.data.WordTokenizer", "zoo.data.vocab:WordTokenizer"),
    "zoo.data.vocab.CharacterVocabulary": ("zoo.data.CharTokenizer", "zoo.data.vocab:CharTokenizer"),
    "zoo.data.vocab.load_vocabulary": ("zoo.data.tokenizers.load_tokenizer", "zoo.data.vocab:load_word_or_char"),
    "zoo.data.tokenizers.Vocabulary": ("zoo.data.WordTokenizer", "zoo.data.vocab:WordTokenizer"),
    "zoo.data.tokenizers.CharacterVocabulary": ("zoo.data.CharTokenizer", "zoo.data.vocab:CharTokenizer"),
    "zoo.data.graph_tokenizers.normalize_subword": ("zoo.data.graph_tokenizers.normalize_subword_in_graph",
                                                    "zoo.data.graph_tokenizers:normalize_subword_in_graph"),
    "zoo.data.build_vocabulary": ("zoo.data.build_tokenizer", "zoo.data.datasets:build_tokenizer"),
    "zoo.data.ptb_vocabulary": ("zoo.data.ptb_tokenizer", "zoo.data.datasets:ptb_tokenizer"),
    "zoo.data.datasets.build_vocabulary": ("zoo.data.build_tokenizer", "zoo.data.datasets:build_tokenizer"),
    "zoo.data.datasets.ptb_vocabulary": ("zoo.data.ptb_tokenizer", "zoo.data.datasets:ptb_tokenizer"),
    "zoo.metrics.Perplexity": ("zoo.metrics.PerplexityMetric", "zoo.metrics:PerplexityMetric"),
    "zoo.preset_directory.load_vocabulary": ("zoo.preset_directory.resolve_tokenizer(directory=)",
                                             "zoo.preset_directory:_saved_tokenizer"),
    "zoo.registry.VOCABULARIES": ("zoo.registry.TOKENIZERS", "zoo.registry:TOKENIZERS"),
    "zoo.registry.default_vocabulary": ("zoo.preset_directory.resolve_tokenizer(preset=, vocabulary_size=)",
                                        "zoo.registry:_default_tokenizer"),
}


def warn(old, new, stacklevel=3):
    """Warns that `old` is deprecated in favour of `new` (both as the user writes them); the
    default `stacklevel` names the caller of the function that calls this."""
    warnings.warn(f"{old} is deprecated; use {new}.", ZooDeprecationWarning, stacklevel=stacklevel)


def former_name(module, name):
    """The object that the former name `name` of `module` stands for (FORMER_NAMES), after a
    warning naming the new spelling; any other name raises `AttributeError` as a module does."""
    if f"{module}.{name}" not in FORMER_NAMES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new, target = FORMER_NAMES[f"{module}.{name}"]
    warn(f"{module}.{name}", new, stacklevel=4)
    home, attribute = target.split(":")
    return getattr(importlib.import_module(home), attribute)


def renamed_keywords(**renames):
    """Decorates a function whose keywords were renamed (`old="new"`, applied in the order given):
    the old keyword still works for one release, with a warning naming the new one; giving both is
    a TypeError. `old=("new", type)` renames only a value of that type (a keyword whose name now
    means something else, as `load_corpus`'s `tokenizer`, once the kind and now the tokenizer)."""
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                new, kind = new if isinstance(new, tuple) else (new, object)
                if old in kwargs and isinstance(kwargs[old], kind):
                    if new in kwargs:
                        raise TypeError(f"{function.__qualname__}() got {new}= and its former name {old}=; "
                                        f"give {new}= only.")
                    value = "..." if kind is object else repr(kwargs[old])  # a conditional rename names the value
                    warn(f"{function.__qualname__}({old}={value})", f"{new}={value}")
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        wrapper.renamed_keywords = dict(renames)
        return wrapper
    return decorate
