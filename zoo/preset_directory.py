"""The preset directory: what `LanguageModel.save_to_preset` writes and `zoo.load` reads back.

    config.json        {"class_name": the family, "config": the model's get_config()}
    model.weights.h5   the weights (Keras' `save_weights`)
    vocabulary.txt …   the tokenizer's own files, if the model has one (`zoo.data.tokenizers`)

as keras-hub's preset directories hold a config, weights and the tokenizer's assets. Which class a
`class_name` means is the registry's business (`zoo.registry.model_config`).

`load_model` is `zoo.load`'s last step: it builds the model, fills in its weights and attaches
the tokenizer `resolve_tokenizer` chooses, the one place that decides where a loaded model's
tokenizer comes from.
"""

import json
import os
import shutil
import tempfile

from zoo.data.datasets import ptb_vocabulary
from zoo.data.tokenizers import CONFIG_FILE as TOKENIZER_FILE
from zoo.data.tokenizers import load_tokenizer
from zoo.data.vocab import FILENAME as VOCABULARY_FILE
from zoo.deprecation import former_name
from zoo.errors import reason

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"


def save(model, directory):
    """Writes `model` (its config, weights and tokenizer) as the preset directory `directory`.

    Files are written into a temporary sibling directory and moved into place, so a failure
    never leaves a half-written preset over an existing one."""
    directory = os.path.abspath(directory)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-preset-", dir=parent)
    try:
        config = {"class_name": type(model).__name__, "config": model.get_config()}
        with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
            json.dump(config, f, indent=2)
        model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
        if model.tokenizer is not None:
            model.tokenizer.save(tmp)
        if os.path.isdir(directory):
            old = directory + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(directory, old)
            os.rename(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def read_config(directory):
    """`(class_name, config)` of the preset directory `directory`; a missing or unreadable
    config.json is refused in one sentence naming it."""
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"The preset directory {directory!r} has no {CONFIG_FILE}.")
    try:
        with open(path) as f:
            saved = json.load(f)
        return saved["class_name"], dict(saved["config"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a valid preset config ({e}).") from None


def load_weights(model, source):
    """Loads a local `.weights.h5` file, or a local preset directory's, into `model`."""
    path = os.path.join(source, WEIGHTS_FILE) if os.path.isdir(source) else source
    if not os.path.isfile(path):
        raise ValueError(f"No weights at {path!r}: expected a preset directory or a .weights.h5 file.")
    try:
        model.load_weights(path)
    except ValueError as e:
        raise ValueError(f"The weights in {path!r} do not fit this model's config: {' '.join(str(e).split())}") from None
    except OSError as e:  # h5py: not an HDF5 file (e.g. a Git LFS pointer), truncated
        raise ValueError(f"{path!r} is not a readable weights file ({reason(e)}).") from None


def build_model(cls, config):
    """`cls(**config)`, built (a family's `__init__` ends by building; one that does not is built
    here), with its initial weights and no tokenizer."""
    model = cls(**config)
    if not model.built:
        model.build()
    return model


# Readers of other frameworks' checkpoints given as `zoo.load(..., weights=)`: (detect(path) ->
# bool, read(path, cls, config, label) -> model), registered by zoo.convert's converters.
CHECKPOINT_READERS = []


def register_checkpoint_reader(detect, read):
    """Lets `zoo.load(preset, weights=FILE)` read a file that `detect(FILE)` recognises with
    `read(FILE, family class, preset config, preset name)`, which returns the model."""
    CHECKPOINT_READERS.append((detect, read))


def load_model(cls, config, weights=None, directory=None, preset=None):
    """`zoo.load`'s model: `cls(**config)` built, with the weights of `weights` (a local
    `.weights.h5` file or preset directory, or None for the initial ones) and the tokenizer
    `resolve_tokenizer(preset, vocabulary_size, directory, weights)` chooses.

    `directory` is the preset directory being loaded, `preset` the `zoo.registry.Preset` being
    loaded by name (one of them is None). A file of another framework is read by the first of
    `CHECKPOINT_READERS` that recognises it (fairseq's: `zoo.convert.fairseq.load_as_preset`)."""
    if weights is not None and os.path.isfile(weights):
        for detect, read in CHECKPOINT_READERS:
            if detect(weights):
                return read(weights, cls, config, preset.name if preset else str(directory))
    model = build_model(cls, config)
    if weights is not None:
        load_weights(model, weights)
    model.tokenizer = resolve_tokenizer(preset, model.vocabulary_size, directory, weights)
    return model


def resolve_tokenizer(preset=None, vocabulary_size=None, directory=None, weights=None):
    """The tokenizer of a loaded model, from the first of these sources that has one:

    1. the weights' preset directory (`weights`, when it is a directory: a preset directory
       given as `weights=`, or the directory of trained weights that ship whole, `gcnn-en`);
    2. the preset directory being loaded (`directory`);
    3. the preset's own (`preset`, a `zoo.registry.Preset`): the Penn Treebank's 10k-word
       tokenizer for `tokenizer="ptb"` when `vocabulary_size` is the preset's;
    4. none: None.

    A tokenizer file that is missing its partner or corrupt raises one sentence naming it
    (`zoo.data.tokenizers.load_tokenizer`)."""
    for candidate in (weights, directory):
        if candidate is not None and os.path.isdir(candidate) and _has_tokenizer(candidate):
            return load_tokenizer(candidate)
    if (preset is not None and preset.tokenizer == "ptb"
            and vocabulary_size == preset.config.get("vocabulary_size")):
        return ptb_vocabulary()
    return None


def _has_tokenizer(directory):
    return any(os.path.exists(os.path.join(directory, name)) for name in (TOKENIZER_FILE, VOCABULARY_FILE))


def _saved_tokenizer(directory):
    return resolve_tokenizer(directory=directory)


# Former names, kept for one release: each warns, naming the new one.
DEPRECATED = {"load_vocabulary": ("zoo.preset_directory.resolve_tokenizer(directory=)", _saved_tokenizer)}


def __getattr__(name):
    return former_name(__name__, name, DEPRECATED)
