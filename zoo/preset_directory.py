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

from zoo.data.datasets import ptb_tokenizer
from zoo.data.base_tokenizer import PRESET_OWN, check_registered, registered_files, saved_tokenizer_class
from zoo.data.tokenizers import load_tokenizer
from zoo.deprecation import former_name
from zoo.errors import reason

CONFIG_FILE, WEIGHTS_FILE = PRESET_OWN  # named once, where tokenizers are kept off them


def preset_files():
    """Every file a preset directory's own writer puts there (every registered tokenizer's too);
    replacing a preset replaces these and leaves any other file beside them alone."""
    return (CONFIG_FILE, WEIGHTS_FILE, *registered_files())


def save(model, directory, families=None):
    """Writes `model` (its config, weights and tokenizer) as the preset directory `directory`:
    a new or empty directory, or an earlier preset directory, whose preset files are replaced
    (other files in it are left as they are). A directory that holds other files but no preset,
    or a path that is a file, is refused in one sentence and left untouched.

    Files are written into a temporary directory first and moved into place, the old preset's
    files moved aside until the new ones are in, so a failure never leaves a half-written preset
    over an existing one. `families`: the class names a preset's config.json may name (the
    registry's families; None: any)."""
    directory = os.path.abspath(directory)
    check_save_target(directory, families)
    if model.tokenizer is not None:
        check_registered(model.tokenizer)
    parent = os.path.dirname(directory)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise ValueError(f"Cannot save a preset directory at {directory}: {reason(e)}.") from None
    staging = directory if os.path.isdir(directory) else parent
    try:
        tmp = tempfile.mkdtemp(prefix=".tmp-preset-", dir=staging)
    except OSError as e:
        raise ValueError(f"Cannot save a preset directory at {directory}: {reason(e)}.") from None
    try:
        config = {"class_name": type(model).__name__, "config": model.get_config()}
        with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
            json.dump(config, f, indent=2)
        model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
        if model.tokenizer is not None:
            model.tokenizer.save(tmp)
        if os.path.isdir(directory):
            _replace_preset_files(tmp, directory)
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def file_in_the_way(path):
    """The file (not a directory) at `path` or above it, that would stop a directory being made
    at `path`; None if there is none."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):  # a broken link is in the way too
        above = os.path.dirname(path)
        if above == path:
            return None
        path = above
    return None if os.path.isdir(path) else path


def check_save_target(directory, families=None):
    """Refuses, in one sentence, a path where `save` must not write: a file (or a path below
    one), or a directory holding files but no preset directory (its own config.json, say, would
    be overwritten)."""
    blocking = file_in_the_way(directory)
    if blocking is not None:
        where = "it is a file" if blocking == directory else f"{blocking} is a file, not a directory"
        raise ValueError(f"Cannot save a preset directory at {directory}: {where}. Give a new or empty "
                         "directory, or an earlier preset directory to replace.")
    if not os.path.isdir(directory):
        return
    entries = sorted(e for e in os.listdir(directory) if not e.startswith((".tmp-preset-", ".old-preset-")))
    folders = [e for e in entries if e in preset_files() and not os.path.isfile(os.path.join(directory, e))]
    if folders:
        raise ValueError(f"Cannot save a preset directory at {directory}: its {folders[0]} is not a file, and saving "
                         "would replace it. Give a new or empty directory, or an earlier preset directory.")
    if all(e in preset_files() for e in entries) or _holds_a_preset(directory, families):
        return  # empty, an earlier preset (perhaps cut short), or the zoo's preset with files of yours beside it
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    raise ValueError(f"Cannot save a preset directory at {directory}: it already holds files that are not a "
                     f"preset ({shown}), which saving could overwrite. Give a new or empty directory, or an "
                     "earlier preset directory to replace.")


def _holds_a_preset(directory, families=None):
    """Whether `directory`'s config.json is a zoo preset's: its class one of `families` (a
    keras-hub preset has a config.json with a class_name too)."""
    try:
        class_name, _ = read_config(directory)
    except ValueError:
        return False
    return families is None or class_name in families


def _replace_preset_files(new, directory):
    """Moves the files of `new` into `directory`, the preset files already there moved aside
    first and back again if the move fails part-way."""
    aside = tempfile.mkdtemp(prefix=".old-preset-", dir=directory)
    moved_aside, moved_in = [], []
    try:
        for name in preset_files():
            if os.path.isfile(os.path.join(directory, name)):
                os.rename(os.path.join(directory, name), os.path.join(aside, name))
                moved_aside.append(name)
        for name in sorted(os.listdir(new)):
            os.rename(os.path.join(new, name), os.path.join(directory, name))
            moved_in.append(name)
    except BaseException:
        for name in moved_in:
            os.replace(os.path.join(directory, name), os.path.join(new, name))
        for name in moved_aside:
            os.replace(os.path.join(aside, name), os.path.join(directory, name))
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def read_config(directory):
    """`(class_name, config)` of the preset directory `directory`; a missing or unreadable
    config.json is refused in one sentence naming it."""
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(path):
        runs = [os.path.join(str(directory), name) for name in ("best", "final")
                if os.path.isfile(os.path.join(directory, name, CONFIG_FILE))]
        hint = f": it looks like a run directory, whose models are {' and '.join(runs)}" if runs else ""
        raise ValueError(f"The preset directory {directory!r} has no {CONFIG_FILE}{hint}.")
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
        hint = " (weights names are lower case: \"trained\" or \"random\")" \
            if str(source).lower() in ("trained", "random") and str(source) not in ("trained", "random") else ""
        raise ValueError(f"No weights at {path!r}: expected a preset directory or a .weights.h5 file{hint}.")
    import h5py

    if not h5py.is_hdf5(path):
        if path.endswith(".h5"):  # a Git LFS pointer, a file cut short
            raise ValueError(f"{path!r} is not a readable weights file (it is not HDF5).")
        raise ValueError(f"{path!r} is not a weights file: expected a .weights.h5 file (Keras' save_weights), a preset "
                         "directory or a fairseq checkpoint (.pt).")
    try:
        model.load_weights(path)
    except ValueError as e:
        difference = first_difference(model, path)
        detail = difference or " ".join(str(e).split())
        raise ValueError(f"The weights in {path!r} do not fit this model's config: {detail}") from None
    except OSError as e:  # h5py: not an HDF5 file (e.g. a Git LFS pointer), truncated
        raise ValueError(f"{path!r} is not a readable weights file ({reason(e)}).") from None


def weights_layout(path):
    """`{array's path: shape}` of a `.weights.h5` file."""
    import h5py

    layout = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: layout.__setitem__(name, tuple(item.shape))
                     if isinstance(item, h5py.Dataset) else None)
    return layout


def first_difference(model, path):
    """Where the weights file `path` first differs from what `model` saves (its arrays' paths and
    shapes, as Keras lays them out), in words; None where the two agree."""
    with tempfile.TemporaryDirectory(prefix="zoo-weights-") as tmp:
        mine = os.path.join(tmp, WEIGHTS_FILE)
        model.save_weights(mine)
        expected = weights_layout(mine)
    found = weights_layout(path)
    differences = [f"its {name} has shape {found[name]}, the model's {shape}"
                   for name, shape in sorted(expected.items()) if name in found and found[name] != shape]
    differences += [f"it has no {name} (shape {shape} in the model)"
                    for name, shape in sorted(expected.items()) if name not in found]
    differences += [f"it has {name} (shape {shape}), which the model has not"
                    for name, shape in sorted(found.items()) if name not in expected]
    if not differences:
        return None
    experts = _expert_count_difference(expected, found)
    if experts:
        return experts
    more = len(differences) - 1
    return (differences[0] + (f" ({more} more difference{'s' if more > 1 else ''})" if more else "") +
            "; load them with the config they were saved with (a preset directory brings its own).")


def _expert_count_difference(expected, found):
    """The one sentence for weights whose mixture of experts has another number of experts than
    the config (the leading axis of an experts' kernel, `SparseMoE`'s first variable), or None."""
    for name, shape in sorted(expected.items()):
        theirs = found.get(name)
        if ("sparse_mo_e" in name and name.endswith("vars/0") and theirs is not None and len(theirs) == 3
                and theirs != shape and theirs[1:] == shape[1:]):
            return (f"the weights hold {theirs[0]} experts in a mixture-of-experts layer ({name}), the config "
                    f"{shape[0]} (num_experts); load them with the config they were saved with, or set "
                    f"num_experts={theirs[0]}.")
    return None


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
        return ptb_tokenizer()
    return None


def _has_tokenizer(directory):
    return saved_tokenizer_class(directory) is not None


def _saved_tokenizer(directory):
    return resolve_tokenizer(directory=directory)


# Former names, kept for one release: each warns, naming the new one.
def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
