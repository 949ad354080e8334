"""Model families and presets: `zoo.presets()`, `zoo.load()` and `count_params()`.

A model family is a subclass of `zoo.models.LanguageModel`; defining it registers it here (under
its class name, the `class_name` a preset directory's config.json records). A family's presets
are a plain dict registered against its class, as keras-hub does:

    register_presets({"gru-small": {"description": "...", "config": {...}}}, GRULanguageModel)

Every preset has the fields of `Preset`, checked when registered: an unknown field, a config key
the family's `__init__` does not take, or an unknown tokenizer kind is refused in one sentence.

`load(name_or_dir, weights=..., weights_sha256=...)` hands its arguments along four modules, each
entered once (docs/architecture.md draws the walk): this one says what to build, `zoo.weights`
finds the weights as a local file, `zoo.preset_directory` builds the model, fills in its weights
and attaches the tokenizer that `zoo.preset_directory.resolve_tokenizer` chooses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

import zoo.weights
from zoo import preset_directory
from zoo.deprecation import former_name, warn
from zoo.layers.validation import plain

# What a preset's `tokenizer` field says about its tokens.
TOKENIZERS = {
    "ptb": "words; zoo.load attaches the Penn Treebank's own 10k-word tokenizer",
    "word": "words; the tokenizer's vocabulary is built from the training corpus",
    "char": "characters; the tokenizer's vocabulary is built from the training corpus",
    "subword": "subwords; the trained weights bring their tokenizer, else one is learned from the corpus",
}
TRAIN_FIELDS = ("batch_size", "seq_len")

FAMILIES = {}  # class name -> LanguageModel subclass
# class name of a former family -> (the family that replaced it, a function of its old config
# returning the new one), so that preset directories saved by the former family still load
RENAMED_FAMILIES = {}
PRESETS = {}  # preset name -> Preset, in registration order


@dataclasses.dataclass(frozen=True)
class Preset:
    """One named configuration of a model family.

    name: what `zoo.load(name)` takes. model_class: the family. config: the family's `__init__`
    arguments. description: one line for `zoo presets`. paper: where the configuration comes from.
    tokenizer: a key of `TOKENIZERS` (the field was called `vocabulary` before; that spelling
    still works for one release, and warns). train: `zoo train`'s defaults for the preset
    (`batch_size`, `seq_len`). fine_tune_optimizer: the optimizer spec (`zoo.optimizers`) that
    fine-tuning the preset's trained weights starts with, when it differs from `config`'s
    pretraining one: `zoo.load(name, weights="trained")` gives the model this spec (what
    `compile()` builds) unless an `optimizer` override is passed, and `zoo train --weights trained`
    uses it unless `--set optimizer=...` is.
    """

    name: str
    model_class: type
    config: dict
    description: str
    paper: str = ""
    tokenizer: str = "word"
    train: dict = dataclasses.field(default_factory=dict)
    fine_tune_optimizer: dict | None = None

    @property
    def vocabulary(self):
        """Deprecated: the former name of `tokenizer`."""
        warn("Preset.vocabulary", "Preset.tokenizer")
        return self.tokenizer

    @property
    def token_kind(self):
        """"char" or "word": what a tokenizer built for this preset from a corpus holds."""
        return "char" if self.tokenizer == "char" else "word"

    @property
    def batch_size(self):
        return self.train.get("batch_size", 32)

    @property
    def seq_len(self):
        return self.train.get("seq_len", 64)


def register_family(cls):
    """Called by `LanguageModel.__init_subclass__`; a second, different class of the same name is
    refused (its preset directories would be ambiguous)."""
    other = FAMILIES.get(cls.__name__)
    if other is not None and (other.__module__, other.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"A model family named {cls.__name__!r} is already registered "
                         f"({other.__module__}.{other.__qualname__}); give the new class another name.")
    FAMILIES[cls.__name__] = cls
    return cls


def register_renamed_family(old_name, cls, translate_config):
    """Preset directories whose config.json names the former family `old_name` load as `cls`,
    their config translated by `translate_config(config) -> config`."""
    RENAMED_FAMILIES[old_name] = (cls, translate_config)


def family_of(class_name, where):
    """`(class, translate_config)` of the family a preset directory's `class_name` names."""
    if class_name in FAMILIES:
        return FAMILIES[class_name], dict
    if class_name in RENAMED_FAMILIES:
        return RENAMED_FAMILIES[class_name]
    raise ValueError(f"{where} names the model class {class_name!r}, which is not a registered "
                     f"model family; known families: {sorted(FAMILIES)}.")


def init_arguments(cls):
    """The config keys `cls` accepts: its `__init__` parameters, and Keras' `name`."""
    params = inspect.signature(cls.__init__).parameters
    return (set(params) - {"self", "args", "kwargs"}) | {"name"}


def register_presets(presets: Mapping[str, Mapping[str, Any]],
                     model_class: type[zoo.models.LanguageModel]) -> list[Preset]:
    """Register `{name: fields}` against `model_class`; returns the `Preset`s made.

    Args:
        presets: `{name: fields}`, the fields those of `Preset`: `description` and `config` (the
            family's `__init__` arguments) are required; `tokenizer`, `paper`, `train` and
            `fine_tune_optimizer` are optional.
        model_class: the model family (`zoo.GCNNLanguageModel`, ... or a subclass).

    Returns:
        The `Preset`s made, in the order of `presets`.

    Example: a preset of a tiny GCNN, which `zoo.load` then builds by name.

    >>> import zoo
    >>> made = zoo.register_presets({"gcnn-tiny": {
    ...     "description": "A GCNN of width 8, for trying things out.",
    ...     "config": {"vocabulary_size": 50, "embedding_dim": 8, "blocks": [[[3, 8]]]}}}, zoo.GCNNLanguageModel)
    >>> [preset.name for preset in made], zoo.presets()["gcnn-tiny"]
    (['gcnn-tiny'], 'A GCNN of width 8, for trying things out.')
    >>> zoo.load("gcnn-tiny", weights="random").count_params()
    1266
    >>> zoo.register_presets({"gcnn-tiny": {"description": "...", "config": {"width": 8}}}, zoo.GCNNLanguageModel)
    Traceback (most recent call last):
    ...
    ValueError: Preset 'gcnn-tiny' of GCNNLanguageModel has config key(s) ['width'] that ... does not take; ...
    >>> del PRESETS["gcnn-tiny"]  # (the example leaves the registry as it found it)
    """
    fields = {f.name for f in dataclasses.fields(Preset)} - {"name", "model_class"}
    if not isinstance(presets, dict):
        raise ValueError(f"register_presets takes a dict of {{name: fields}}, got {type(presets).__name__}.")
    if not isinstance(model_class, type):
        raise ValueError(f"register_presets takes the model family's class (e.g. zoo.GCNNLanguageModel or a "
                         f"subclass), got {model_class!r}.")
    made = []
    for name, spec in presets.items():
        where = f"Preset {name!r} of {model_class.__name__}"
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            raise ValueError(f"A preset name must be a non-empty string that is not a path, got {name!r}.")
        if not isinstance(spec, dict):
            raise ValueError(f"{where} must be a dict of {sorted(fields)}, got {type(spec).__name__}.")
        kind_field = "tokenizer"
        if "vocabulary" in spec:  # the field's former name
            if "tokenizer" in spec:
                raise ValueError(f"{where} has both 'tokenizer' and its former name 'vocabulary'; keep 'tokenizer'.")
            warn(f"The preset field 'vocabulary' (in {where})", "'tokenizer'")
            spec = {("tokenizer" if key == "vocabulary" else key): value for key, value in spec.items()}
            kind_field = "vocabulary"
        unknown = sorted(set(spec) - fields)
        if unknown:
            raise ValueError(f"{where} has unknown field(s) {unknown}; a preset has {sorted(fields)}.")
        for required in ("description", "config"):
            if required not in spec:
                raise ValueError(f"{where} has no {required!r}.")
        bad = sorted(set(spec["config"]) - init_arguments(model_class))
        if bad:
            raise ValueError(f"{where} has config key(s) {bad} that {model_class.__name__} does not take; "
                             f"it takes {sorted(init_arguments(model_class))}.")
        if spec.get("tokenizer", "word") not in TOKENIZERS:
            raise ValueError(f"{where} has {kind_field} {spec['tokenizer']!r}; expected one of {list(TOKENIZERS)}.")
        bad = sorted(set(spec.get("train", {})) - set(TRAIN_FIELDS))
        if bad:
            raise ValueError(f"{where} has train field(s) {bad}; expected some of {list(TRAIN_FIELDS)}.")
        if name in PRESETS and PRESETS[name].model_class is not model_class:
            raise ValueError(f"A preset named {name!r} is already registered for "
                             f"{PRESETS[name].model_class.__name__}.")
        preset = Preset(name=name, model_class=model_class, **spec)
        PRESETS[name] = preset
        made.append(preset)
    return made


def presets() -> dict[str, str]:
    """Every preset name with its one-line description.

    Returns:
        `{name: description}`, in the order the presets were registered.

    Example:

    >>> import zoo
    >>> zoo.presets()["lstm-ptb"]
    'The recurrent baseline on the Penn Treebank: a 2-layer LSTM of 256 units, embedding 256, dropout 0.2.'
    >>> [name for name in zoo.presets() if name.startswith("gcnn-1")]
    ['gcnn-13', 'gcnn-14b', 'gcnn-14']
    """
    return {name: preset.description for name, preset in PRESETS.items()}


def get_preset(name: str | os.PathLike) -> Preset:
    """The `Preset` called `name`; an unknown name is refused with the closest known ones, a path
    (a preset directory that is not there) as a directory that does not exist."""
    if name not in PRESETS and isinstance(name, (str, os.PathLike)) and (
            os.sep in str(name) or str(name).startswith(".")):
        raise ValueError(f"The preset directory {str(name)!r} does not exist.")
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown preset {name!r}.{hint} Known presets: {', '.join(PRESETS)} "
            "(or give a preset directory)."
        )
    return PRESETS[name]


def model_config(name_or_dir: str | os.PathLike, **overrides) -> tuple[type[zoo.models.LanguageModel], dict[str, Any]]:
    """`(model class, config)` for a preset name or a preset directory, with `overrides` applied."""
    cls, config, _, _ = _blueprint(name_or_dir, overrides)
    return cls, config


def _blueprint(name_or_dir, overrides):
    """`(model class, config, preset, directory)` of a preset name (`directory` None) or a preset
    directory (`preset` None), with `overrides` applied to the config."""
    if os.path.isdir(str(name_or_dir)):
        preset, directory = None, name_or_dir
        class_name, config = preset_directory.read_config(name_or_dir)
        cls, translate = family_of(class_name, os.path.join(name_or_dir, preset_directory.CONFIG_FILE))
        config = translate(config)
    elif isinstance(name_or_dir, str) and name_or_dir not in PRESETS and os.path.isfile(name_or_dir):
        raise ValueError(f"{name_or_dir!r} is a file; zoo.load takes a preset name or a preset directory "
                         f"(here perhaps {os.path.dirname(os.path.abspath(name_or_dir))!r}), and a weights file as "
                         "weights=.")
    else:  # a name, or a path to a preset directory that is not there (get_preset says so)
        preset, directory = get_preset(name_or_dir), None
        cls, config = preset.model_class, dict(preset.config)
    unknown = sorted(set(overrides) - init_arguments(cls))
    if unknown:
        raise ValueError(
            f"Unknown config key(s) {unknown} for {cls.__name__}; accepted: {sorted(init_arguments(cls))}."
        )
    config.update(plain(overrides))  # numpy numbers as Python's
    return cls, config, preset, directory


def load(name_or_dir: str | os.PathLike, weights: str | os.PathLike | None = None,
         weights_sha256: str | None = None, **overrides) -> zoo.models.LanguageModel:
    """A built model from a preset name or from a preset directory written by `save_to_preset`.

    The model comes with its weights and, where one is found, its tokenizer (`model.tokenizer`):
    the weights' preset directory's, else `name_or_dir`'s when it is a directory, else the
    preset's own (the Penn Treebank's for `gcnn-ptb` when `vocabulary_size` is not overridden),
    else none (`zoo.preset_directory.resolve_tokenizer`).

    Args:
        name_or_dir: a preset name (`zoo.presets()`) or a preset directory.
        weights: where the weights come from (`zoo.weights` describes the sources):
            None: a preset name gets random weights, and prints one line saying so on stderr
            (once per name per process); a preset directory gets its own weights.
            "random": random weights without that line (a preset directory still brings its
            tokenizer).
            "trained": the trained weights that ship for the preset (`zoo.weights.TRAINED`); a
            preset without them is refused in one sentence naming the presets that have them.
            The model's optimizer spec is then the preset's fine-tuning one where it names one
            (`Preset.fine_tune_optimizer`; gcnn-en's), unless `optimizer=` is overridden.
            A path: a `.weights.h5` file or a preset directory (whose tokenizer comes with it),
            local (`file://` too) or anywhere `tf.io.gfile` reads (`gs://...`).
            An `https://` address of a `.weights.h5` file, with `weights_sha256` (required):
            downloaded once into `$ZOO_CACHE_DIR` (default `~/.cache/zoo/weights`) and checked.
        weights_sha256: 64 hex digits that the weights file must hash to (SHA-256); it also
            checks a local or gfile weights file.
        **overrides: config keys to replace, e.g. `vocabulary_size=` or `dropout=`; the weights
            must fit the resulting config.

    Returns:
        The family's `zoo.models.LanguageModel`, built: it takes `<int32>[batch, time]` token ids
        and `log_probs` gives `<float32>[batch, time, vocabulary_size]`.

    Raises:
        ValueError: in one sentence, for an unknown preset, a config key the family does not
            take, or weights that are missing, unreadable, mis-hashed or do not fit.

    Example:

    >>> import zoo
    >>> lm = zoo.load("gcnn-ptb", weights="trained")
    >>> lm.vocabulary_size, len(lm.tokenizer), lm.tokenizer.kind
    (10002, 10002, 'word')
    """
    # The walk (docs/architecture.md): each step is one call into a module not yet entered.
    cls, config, preset, directory = _blueprint(name_or_dir, overrides)
    with contextlib.ExitStack() as scratch:  # a temporary local copy of remote weights lives here
        local = zoo.weights.fetch(weights, weights_sha256, preset=preset and preset.name,
                                  directory=directory, scratch=scratch)
        model = preset_directory.load_model(cls, config, local, directory=directory, preset=preset)
    spec = fine_tune_optimizer(preset) if weights == "trained" and "optimizer" not in overrides else None
    if spec is not None:
        model.optimizer_config = spec  # what compile() builds to fine-tune it
    return model


def fine_tune_optimizer(preset: Preset | str) -> dict[str, Any] | None:
    """The optimizer spec that fine-tuning `preset`'s (a `Preset` or a name) trained weights
    starts with, or None where it is the preset's own."""
    preset = get_preset(preset) if isinstance(preset, str) else preset
    spec = getattr(preset, "fine_tune_optimizer", None)
    return None if spec is None else dict(spec)


def build(name_or_dir: str | os.PathLike, **overrides) -> zoo.models.LanguageModel:
    """The model of a preset name or a preset directory, with `overrides` of its config, built
    from that config alone: its initial weights, no tokenizer (`load` adds both)."""
    return preset_directory.build_model(*model_config(name_or_dir, **overrides))


def count_params(name_or_dir: str | os.PathLike, **overrides) -> int:
    """The parameter count of a preset (or preset directory), read off the model's own layers.

    The model is built inside a `tf.Graph`, where its variables are graph nodes that are never
    initialised: the shapes are the layers' own (no hand-written mirror of them) and nothing is
    allocated, so even Table 7's 5-billion-parameter models are counted without their memory.

    Returns:
        The number of weights of the model the preset and `overrides` make.

    Example: Table 1's GCNN-14 (WikiText-103), and the treebank GCNN at a tiny size.

    >>> import zoo
    >>> zoo.count_params("gcnn-14")
    223498623
    >>> zoo.count_params("gcnn-ptb", vocabulary_size=50, embedding_dim=8, blocks=[[[2, 8]]])
    1138
    """
    with tf.Graph().as_default():
        return build(name_or_dir, **overrides).count_params()


def _default_tokenizer(preset, vocabulary_size):
    return preset_directory.resolve_tokenizer(preset=preset, vocabulary_size=vocabulary_size)


# Former names, kept for one release: each warns, naming the new one.
def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
