"""`zoo train`: a preset, a corpus and a time budget in; a trained preset directory out.

The run directory holds `history.json` (per-epoch metrics), `logs/` (TensorBoard) and `best/`,
the preset directory of the epoch with the lowest validation perplexity (stream protocol).
"""

import json
import math
import os
import time

import keras

from zoo import registry
from zoo.data import pipeline
from zoo.data.corpus import read_lines
from zoo.data.datasets import build_vocabulary


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `minutes` have passed; the epoch's validation still runs."""

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60.0
        self.start = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self._check()

    def on_epoch_end(self, epoch, logs=None):
        # Also here: a budget that runs out during validation must not start another epoch
        # only to stop it after one step and validate again.
        self._check()

    def _check(self):
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True
            self.stopped = True


class BestPreset(keras.callbacks.Callback):
    """Saves the model as a preset directory whenever validation perplexity improves, and
    writes every epoch's metrics to `history.json`."""

    def __init__(self, out_dir, monitor="val_perplexity"):
        super().__init__()
        self.out_dir = out_dir
        self.monitor = monitor
        self.best = math.inf
        self.history = []
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        logs = {k: float(v) for k, v in (logs or {}).items()}
        logs["epoch"] = epoch + 1
        logs["seconds"] = round(time.monotonic() - self.start, 1)
        value = logs.get(self.monitor, logs.get("perplexity", math.inf))
        logs["best"] = value < self.best
        if value < self.best:
            self.best = value
            self.model.save_to_preset(os.path.join(self.out_dir, "best"))
        self.history.append(logs)
        with open(os.path.join(self.out_dir, "history.json"), "w") as f:
            json.dump(self.history, f, indent=2)


def prepare(preset, data="ptb", min_count=1, max_vocabulary=None, **overrides):
    """The corpus' train/valid lines, its vocabulary and a model sized for it."""
    spec = registry.preset_spec(preset) if not os.path.isdir(preset) else {}
    train_lines = read_lines(data, "train")
    valid_lines = read_lines(data, "valid")
    kind = spec.get("vocabulary", "word")
    if os.path.isdir(preset):
        vocabulary = registry.load_vocabulary_if_any(preset)
        if vocabulary is None:
            raise ValueError(f"The preset directory {preset!r} has no vocabulary to train with.")
    else:
        vocabulary = build_vocabulary(data, kind, min_count, max_vocabulary)
    overrides.setdefault("vocabulary_size", len(vocabulary))
    model = registry.load(preset, **overrides)
    model.vocabulary = vocabulary
    return model, train_lines, valid_lines


def train(preset, data="ptb", out_dir="runs/model", epochs=None, max_minutes=None,
          steps_per_epoch=None, batch_size=None, seq_len=None, optimizer=None, seed=0,
          verbose="auto", min_count=1, max_vocabulary=None, **overrides):
    """Train `preset` on `data`; returns `(model, history)` with the best epoch's weights."""
    keras.utils.set_random_seed(seed)
    spec = registry.PRESETS.get(preset, {}).get("train", {})
    batch_size = batch_size or spec.get("batch_size", 32)
    seq_len = seq_len or spec.get("seq_len", 64)
    if epochs is None:
        epochs = 1000 if max_minutes else 1
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("epochs", epochs)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}.")
    if max_minutes is not None and max_minutes <= 0:
        raise ValueError(f"max_minutes must be > 0, got {max_minutes}.")
    model, train_lines, valid_lines = prepare(preset, data, min_count, max_vocabulary, **overrides)
    os.makedirs(out_dir, exist_ok=True)
    vocab = model.vocabulary
    train_ds = pipeline.stream_dataset(train_lines, vocab, batch_size, seq_len, shuffle=True,
                                       seed=seed, repeat=steps_per_epoch is not None)
    valid_ds = pipeline.stream_dataset(valid_lines, vocab, batch_size, seq_len,
                                       context=model.stream_context)
    model.compile(optimizer=optimizer)
    best = BestPreset(out_dir)
    callbacks = [best, keras.callbacks.TensorBoard(os.path.join(out_dir, "logs"))]
    if max_minutes:
        callbacks.append(TimeBudget(max_minutes))
    model.fit(train_ds, validation_data=valid_ds, epochs=epochs, steps_per_epoch=steps_per_epoch,
              callbacks=callbacks, verbose=verbose, shuffle=False)  # windows are shuffled by tf.data
    best_dir = os.path.join(out_dir, "best")
    if os.path.isdir(best_dir):
        model.load_weights(os.path.join(best_dir, "model.weights.h5"))
    return model, best.history
