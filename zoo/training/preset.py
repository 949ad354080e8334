"""Everything training asks of the preset registry, in one place: a preset's training defaults
and vocabulary (`resolve_preset`), and the model it loads (`load_model`; `zoo.registry.build`
gives one without its weights)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

import keras

from zoo import preset_directory, registry

if TYPE_CHECKING:
    from zoo.data import CharTokenizer, SubwordTokenizer, WordTokenizer


@dataclasses.dataclass(frozen=True)
class PresetInfo:
    """What training needs to know of a preset before building it.

    `train_defaults`: the preset's default training options, keyed by `TrainConfig` field names
    (`global_batch_size`, `seq_len`); `vocabulary_kind`: the kind of vocabulary to build from the
    corpus ("word" or "char"), None for a preset directory, which brings its own `tokenizer`.

    Example:

    >>> from zoo.training import resolve_preset
    >>> info = resolve_preset("gcnn-ptb")
    >>> info.train_defaults["seq_len"] > 0, info.vocabulary_kind, info.tokenizer
    (True, 'word', None)
    """

    train_defaults: dict[str, int]
    vocabulary_kind: str | None
    tokenizer: WordTokenizer | CharTokenizer | SubwordTokenizer | None = None
    fixes_head: bool = True  # whether the config chooses the output layer (its `cutoffs`)


def resolve_preset(preset: str | os.PathLike) -> PresetInfo:
    """The `PresetInfo` of a preset name or a preset directory; an unknown name, or a directory
    without a tokenizer, is refused in one sentence.

    Returns:
        The preset's `PresetInfo`: its training defaults and the tokenizer to build or use.

    Example:

    >>> from zoo.training import resolve_preset
    >>> resolve_preset("rnn-char").vocabulary_kind
    'char'
    >>> resolve_preset("no-such-preset")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'no-such-preset'...
    """
    if os.path.isdir(preset):
        tokenizer = preset_directory.resolve_tokenizer(directory=preset)
        if tokenizer is None:
            raise ValueError(f"The preset directory {preset!r} has no tokenizer to train with.")
        return PresetInfo({}, None, tokenizer)  # its config records its output layer
    spec = registry.get_preset(preset)  # a `registry.Preset`
    return PresetInfo({"global_batch_size": spec.batch_size, "seq_len": spec.seq_len}, spec.token_kind,
                      fixes_head="cutoffs" in spec.config)


def load_model(preset: str | os.PathLike, **overrides) -> keras.Model:
    """The model of a preset name or directory, with `overrides` of its config.

    Returns:
        The preset's `zoo.LanguageModel`: random weights for a preset name (training starts
        there), the directory's own for a preset directory.

    Example:

    >>> from zoo.training import load_model
    >>> model = load_model("gcnn-ptb", vocabulary_size=50, embedding_dim=8, blocks=[[[2, 8]]])
    >>> type(model).__name__, model.vocabulary_size
    ('GCNNLanguageModel', 50)
    """
    # a preset name starts from random weights on purpose: no "random weights" notice
    weights = None if os.path.isdir(str(preset)) else "random"
    return registry.load(preset, weights=weights, **overrides)
