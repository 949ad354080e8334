"""Everything training asks of the preset registry, in one place: a preset's training defaults
and vocabulary (`resolve_preset`), and the model it loads (`load_model`; `zoo.registry.build`
gives one without its weights)."""

import dataclasses
import os

from zoo import preset_directory, registry


@dataclasses.dataclass(frozen=True)
class PresetInfo:
    """What training needs to know of a preset before building it.

    `train_defaults`: the preset's default training options, keyed by `TrainConfig` field names
    (`global_batch_size`, `seq_len`); `vocabulary_kind`: the kind of vocabulary to build from the
    corpus ("word" or "char"), None for a preset directory, which brings its own `tokenizer`."""

    train_defaults: dict
    vocabulary_kind: str | None
    tokenizer: object = None
    fixes_head: bool = True  # whether the config chooses the output layer (its `cutoffs`)


def resolve_preset(preset):
    """The `PresetInfo` of a preset name or a preset directory; an unknown name, or a directory
    without a tokenizer, is refused in one sentence."""
    if os.path.isdir(preset):
        tokenizer = preset_directory.resolve_tokenizer(directory=preset)
        if tokenizer is None:
            raise ValueError(f"The preset directory {preset!r} has no tokenizer to train with.")
        return PresetInfo({}, None, tokenizer)  # its config records its output layer
    spec = registry.get_preset(preset)  # a `registry.Preset`
    return PresetInfo({"global_batch_size": spec.batch_size, "seq_len": spec.seq_len}, spec.token_kind,
                      fixes_head="cutoffs" in spec.config)


def load_model(preset, **overrides):
    """The model of a preset name or directory, with `overrides` of its config."""
    # a preset name starts from random weights on purpose: no "random weights" notice
    weights = None if os.path.isdir(str(preset)) else "random"
    return registry.load(preset, weights=weights, **overrides)
