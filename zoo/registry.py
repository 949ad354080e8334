"""Model families and presets: `zoo.presets()`, `zoo.load()` and `count_params()`.

A model family is a subclass of `zoo.models.LanguageModel`; defining it registers it here (under
its class name, the `class_name` a preset directory's config.json records). A family's presets
are a plain dict registered against its class, as keras-hub does:

    register_presets({"gru-small": {"description": "...", "config": {...}}}, GRULanguageModel)

Every preset has the fields of `Preset`, checked when registered: an unknown field, a config key
the family's `__init__` does not take, or an unknown vocabulary kind is refused in one sentence.

`load(name_or_dir, weights=..., weights_sha256=...)` builds the model and fills its weights from
the source `zoo.weights` resolves to a local file: random (a preset name's default, announced
once on stderr), the trained weights that ship for a preset (`zoo.weights.TRAINED`), a local or
`tf.io.gfile` path, or an https address checked against its SHA-256 and cached.
"""

import dataclasses
import difflib
import inspect
import os

import tensorflow as tf

from zoo import preset_directory
from zoo import weights as sources
from zoo.data.datasets import ptb_vocabulary

# What a preset's `vocabulary` field says about its tokens.
VOCABULARIES = {
    "ptb": "words; zoo.load attaches the Penn Treebank's own 10k vocabulary",
    "word": "words; the vocabulary is built from the training corpus",
    "char": "characters; the vocabulary is built from the training corpus",
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
    vocabulary: a key of `VOCABULARIES`. train: `zoo train`'s defaults for the preset
    (`batch_size`, `seq_len`).
    """

    name: str
    model_class: type
    config: dict
    description: str
    paper: str = ""
    vocabulary: str = "word"
    train: dict = dataclasses.field(default_factory=dict)

    @property
    def token_kind(self):
        """"char" or "word": what a vocabulary built for this preset from a corpus holds."""
        return "char" if self.vocabulary == "char" else "word"

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


def register_presets(presets, model_class):
    """Register `{name: fields}` against `model_class`; returns the `Preset`s made."""
    fields = {f.name for f in dataclasses.fields(Preset)} - {"name", "model_class"}
    made = []
    for name, spec in presets.items():
        where = f"Preset {name!r} of {model_class.__name__}"
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            raise ValueError(f"A preset name must be a non-empty string that is not a path, got {name!r}.")
        if not isinstance(spec, dict):
            raise ValueError(f"{where} must be a dict of {sorted(fields)}, got {type(spec).__name__}.")
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
        if spec.get("vocabulary", "word") not in VOCABULARIES:
            raise ValueError(f"{where} has vocabulary {spec['vocabulary']!r}; expected one of {list(VOCABULARIES)}.")
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


def presets():
    """Every preset name with its one-line description."""
    return {name: preset.description for name, preset in PRESETS.items()}


def get_preset(name):
    """The `Preset` called `name`; an unknown name is refused with the closest known ones."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown preset {name!r}.{hint} Known presets: {', '.join(PRESETS)} "
            "(or give a preset directory)."
        )
    return PRESETS[name]


def model_config(name_or_dir, **overrides):
    """`(model class, config)` for a preset name or a preset directory, with `overrides` applied."""
    if os.path.isdir(str(name_or_dir)):
        class_name, config = preset_directory.read_config(name_or_dir)
        cls, translate = family_of(class_name, os.path.join(name_or_dir, preset_directory.CONFIG_FILE))
        config = translate(config)
    elif isinstance(name_or_dir, str) and (os.sep in name_or_dir or name_or_dir.startswith(".")):
        raise ValueError(f"The preset directory {name_or_dir!r} does not exist.")
    else:
        preset = get_preset(name_or_dir)
        cls, config = preset.model_class, dict(preset.config)
    unknown = sorted(set(overrides) - init_arguments(cls))
    if unknown:
        raise ValueError(
            f"Unknown config key(s) {unknown} for {cls.__name__}; accepted: {sorted(init_arguments(cls))}."
        )
    config.update(overrides)
    return cls, config


def load(name_or_dir, weights=None, weights_sha256=None, **overrides):
    """A built model from a preset name or from a preset directory written by `save_to_preset`.

    `weights` (the sources are described in `zoo.weights`):

    - None: a preset name gets random weights, and prints one line saying so on stderr (once per
      name per process); a preset directory gets its own weights.
    - "random": random weights without that line (a preset directory still brings its vocabulary).
    - "trained": the trained weights that ship for the preset (`zoo.weights.TRAINED`); a preset
      without them is refused in one sentence naming the presets that have them.
    - a path: a `.weights.h5` file or a preset directory (whose vocabulary comes with it), local
      (`file://` too) or anywhere `tf.io.gfile` reads (`gs://...`).
    - an `https://` address of a `.weights.h5` file, with `weights_sha256` (required): downloaded
      once into `$ZOO_CACHE_DIR` (default `~/.cache/zoo/weights`) and checked.

    `weights_sha256` (64 hex digits) also checks a local or gfile weights file. `overrides` replace
    config keys, e.g. `vocabulary_size=` or `dropout=`; the weights must fit the resulting config.
    The vocabulary is the weights' preset directory's, else `name_or_dir`'s when it is a directory,
    else the preset's own (the treebank's for `gcnn-ptb` when `vocabulary_size` is not overridden).
    """
    cls, config = model_config(name_or_dir, **overrides)
    is_directory = os.path.isdir(str(name_or_dir))
    source = name_or_dir if weights is None and is_directory else weights
    with sources.local_source(source, weights_sha256, preset=None if is_directory else name_or_dir) as local:
        model = _built(cls, config)
        vocabulary = None
        if local is not None:
            preset_directory.load_weights(model, local)
            if os.path.isdir(local):
                vocabulary = preset_directory.load_vocabulary(local)
    if vocabulary is None and is_directory and source is not name_or_dir:
        vocabulary = preset_directory.load_vocabulary(name_or_dir)
    if vocabulary is None and not is_directory:
        vocabulary = default_vocabulary(get_preset(name_or_dir), model.vocabulary_size)
    if vocabulary is not None:
        model.vocabulary = vocabulary
    if weights is None and not is_directory:
        sources.notice_random_weights(name_or_dir)
    return model


def build(name_or_dir, **overrides):
    """The model of a preset name or a preset directory, with `overrides` of its config, built
    from that config alone: its initial weights, no vocabulary (`load` adds both)."""
    return _built(*model_config(name_or_dir, **overrides))


def _built(cls, config):
    model = cls(**config)
    if not model.built:  # a family's __init__ ends with build(); one that does not is built here
        model.build()
    return model


def default_vocabulary(preset, vocabulary_size):
    """The vocabulary a preset comes with: the treebank's own for `vocabulary="ptb"` (when the
    size was not overridden), else none."""
    if preset.vocabulary == "ptb" and vocabulary_size == preset.config.get("vocabulary_size"):
        return ptb_vocabulary()
    return None


def count_params(name_or_dir, **overrides):
    """The parameter count of a preset (or preset directory), read off the model's own layers.

    The model is built inside a `tf.Graph`, where its variables are graph nodes that are never
    initialised: the shapes are the layers' own (no hand-written mirror of them) and nothing is
    allocated, so even Table 7's 5-billion-parameter models are counted without their memory."""
    with tf.Graph().as_default():
        return build(name_or_dir, **overrides).count_params()
