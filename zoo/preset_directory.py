"""The preset directory: what `LanguageModel.save_to_preset` writes and `zoo.load` reads back.

    config.json        {"class_name": the family, "config": the model's get_config()}
    model.weights.h5   the weights (Keras' `save_weights`)
    vocabulary.txt …   the tokenizer's own files, if the model has one (`zoo.data.tokenizers`)

as keras-hub's preset directories hold a config, weights and the tokenizer's assets. Which class a
`class_name` means is the registry's business (`zoo.registry.model_config`).
"""

import json
import os
import shutil
import tempfile

from zoo.data.tokenizers import CONFIG_FILE as TOKENIZER_FILE
from zoo.data.tokenizers import load_tokenizer
from zoo.data.vocab import FILENAME as VOCABULARY_FILE
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
        if model.vocabulary is not None:
            model.vocabulary.save(tmp)
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


def load_vocabulary(directory):
    """The tokenizer saved in the preset directory `directory` (any kind:
    `zoo.data.tokenizers.load_tokenizer`), or None when it has none; a tokenizer file that is
    missing its partner or corrupt raises one sentence naming the file."""
    if any(os.path.exists(os.path.join(directory, name)) for name in (TOKENIZER_FILE, VOCABULARY_FILE)):
        return load_tokenizer(directory)
    return None
