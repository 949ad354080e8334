"""`zoo.presets()` and `zoo.load()`: from a preset name or a preset directory to a built model."""

import difflib
import inspect
import json
import os

from zoo.models.base import CONFIG_FILE, WEIGHTS_FILE, load_vocabulary_if_any
from zoo.models.gcnn import GCNNLanguageModel
from zoo.models.recurrent import RecurrentLanguageModel
from zoo.models.stack import StackLanguageModel
from zoo.presets import PRESETS

MODEL_CLASSES = {cls.__name__: cls for cls in (GCNNLanguageModel, RecurrentLanguageModel, StackLanguageModel)}


def presets():
    """Every preset name with its one-line description."""
    return {name: spec["description"] for name, spec in PRESETS.items()}


def preset_spec(name):
    if name not in PRESETS:
        close = difflib.get_close_matches(name, PRESETS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown preset {name!r}.{hint} Known presets: {', '.join(PRESETS)} "
            "(or give a preset directory)."
        )
    return PRESETS[name]


def model_config(name_or_dir, **overrides):
    """`(class_name, config)` for a preset name or directory, with `overrides` applied."""
    if os.path.isdir(name_or_dir):
        path = os.path.join(name_or_dir, CONFIG_FILE)
        if not os.path.isfile(path):
            raise ValueError(f"The preset directory {name_or_dir!r} has no {CONFIG_FILE}.")
        try:
            with open(path) as f:
                saved = json.load(f)
            class_name, config = saved["class_name"], dict(saved["config"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a valid preset config ({e}).") from None
    elif isinstance(name_or_dir, str) and (os.sep in name_or_dir or name_or_dir.startswith(".")):
        raise ValueError(f"The preset directory {name_or_dir!r} does not exist.")
    else:
        spec = preset_spec(name_or_dir)
        class_name, config = spec["class_name"], dict(spec["config"])
    if class_name not in MODEL_CLASSES:
        raise ValueError(f"Unknown model class {class_name!r}; expected one of {sorted(MODEL_CLASSES)}.")
    accepted = set(inspect.signature(MODEL_CLASSES[class_name].__init__).parameters) - {"self", "kwargs"}
    accepted.add("name")
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise ValueError(
            f"Unknown config key(s) {unknown} for {class_name}; accepted: {sorted(accepted)}."
        )
    config.update(overrides)
    return class_name, config


def load(name_or_dir, weights=None, **overrides):
    """A built model from a preset name (random weights unless `weights` is given) or from a
    preset directory written by `save_to_preset` (its weights and vocabulary).

    `weights` is a preset directory or a `.weights.h5` file. `overrides` replace config keys,
    e.g. `vocabulary_size=` or `dropout=`.
    """
    class_name, config = model_config(name_or_dir, **overrides)
    model = MODEL_CLASSES[class_name](**config)
    source = weights
    if source is None and os.path.isdir(str(name_or_dir)):
        source = name_or_dir
    if source is not None:
        load_weights(model, source)
        if os.path.isdir(source):
            model.vocabulary = load_vocabulary_if_any(source)
    if model.vocabulary is None and not os.path.isdir(str(name_or_dir)) and name_or_dir in PRESETS:
        model.vocabulary = default_vocabulary(name_or_dir, model.vocabulary_size)
    return model


def load_weights(model, source):
    path = os.path.join(source, WEIGHTS_FILE) if os.path.isdir(source) else source
    if not os.path.isfile(path):
        raise ValueError(f"No weights at {path!r}: expected a preset directory or a .weights.h5 file.")
    try:
        model.load_weights(path)
    except ValueError as e:
        raise ValueError(f"The weights in {path!r} do not fit this model's config: {e}") from None


def default_vocabulary(name, vocabulary_size):
    """The Penn Treebank presets come with the treebank's own vocabulary."""
    if name.endswith("-ptb") and name != "rnn-char" and vocabulary_size == PRESETS[name]["config"]["vocabulary_size"]:
        from zoo.data.datasets import ptb_vocabulary

        return ptb_vocabulary()
    return None
