"""The training loop (`Trainer`, with `Callback` hooks) and `train()`, which puts a run together.

Why a loop of our own rather than Orbit's `Controller`: what it must guarantee sits exactly where
Orbit delegates to `tf.train.CheckpointManager` (see `zoo.training.checkpoints`). The loop, the
step (`zoo.training.steps`) and the checkpoints are separate pieces, as in Model Garden's
`base_trainer` and Orbit; `Trainer` only composes them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from zoo import compat, preset_directory, registry
from zoo.training import distribute
import zoo.weights
from zoo.data.corpus import scored_words, unknown_note, unknown_share
from zoo.layers.expert_parallel import expert_parallelism, is_expert_shard
from zoo.training.actions import ProgressLog, Summaries, TimeBudget, metric_results, reset_metrics
from zoo.training.checkpoints import (CHECKPOINT_DIR, batch_change_note, checkpoint_path, restore_latest,
                                      run_directory_refusal, run_identity, save_checkpoint, write_json,
                                      write_run_record, training_checkpoint)
from zoo.training.config import TrainConfig
from zoo.deprecation import renamed_keywords
from zoo.training.data import TrainingWindows, evaluation_windows, load_corpus, shard_rows
from zoo.training.extension import DIRECTORY as EXTENDED_DIR, check_start, extended_start
from zoo.training.precision import dtype_policy, mixed_precision_policy
from zoo.training.preset import PresetInfo, load_model, resolve_preset
from zoo.training.sharding import ExpertShards, load_unsharded
from zoo.training.steps import step_functions
from zoo.training.workers import any_worker, min_max


if TYPE_CHECKING:
    from zoo.data import CharTokenizer, SubwordTokenizer, WordTokenizer
    from zoo.models.base import LanguageModel

logger = logging.getLogger(__name__)


def _log(message):
    """Where the run's progress lines go by default: the `zoo.training.trainer` logger, at INFO
    (`zoo.logs`: standard output while the application has not set up logging, else its handlers)."""
    logger.info(message)


class Callback:
    """Hooks into the loop. Subclass and override, or pass the functions, as with
    `keras.callbacks.LambdaCallback`: `Callback(on_step_end=lambda step, loss: ...)`.

    - `on_train_begin(trainer)`: before the first step (after the restore);
    - `on_step_end(step, loss)`: after every step and its checkpoint, if any (`step` counts from
      1 over the whole run, resumed or not);
    - `on_validation_end(step, entry)`: after every validation, with its `history` entry;
    - `on_train_end(trainer)`: after the last step and the final preset.

    Example: keep every step's loss (`train(..., callbacks=[callback])` calls it).

    >>> from zoo.training import Callback
    >>> losses = []
    >>> callback = Callback(on_step_end=lambda step, loss: losses.append((step, loss)))
    >>> callback.on_step_end(1, 3.5)
    >>> callback.on_train_end(None)  # a hook not given does nothing
    >>> losses
    [(1, 3.5)]
    """

    def __init__(self, on_train_begin: Callable[[Trainer], None] | None = None,
                 on_step_end: Callable[[int, float], None] | None = None,
                 on_validation_end: Callable[[int, dict[str, Any]], None] | None = None,
                 on_train_end: Callable[[Trainer], None] | None = None):
        for name, function in (("on_train_begin", on_train_begin), ("on_step_end", on_step_end),
                               ("on_validation_end", on_validation_end), ("on_train_end", on_train_end)):
            if function is not None:
                setattr(self, name, function)

    def on_train_begin(self, trainer: Trainer) -> None:
        pass

    def on_step_end(self, step: int, loss: float) -> None:
        pass

    def on_validation_end(self, step: int, entry: dict[str, Any]) -> None:
        pass

    def on_train_end(self, trainer: Trainer) -> None:
        pass


class Trainer:
    """Trains a built `model` with a built `optimizer` under `strategy` into `out_dir`.

        trainer = Trainer(model, optimizer, strategy, config, train_data, valid_data, out_dir)
        history = trainer.fit()

    `config` is a `TrainConfig` whose `global_batch_size` and `seq_len` are set; `train_data` a
    `TrainingWindows`; `valid_data` the `(inputs, targets, weights)` arrays of
    `evaluation_windows`; `valid_words` the number of words those windows score
    (`zoo.data.corpus.scored_words` of the validation lines), for the per-word perplexity printed
    beside the per-token one (None: per token only); `valid_unknown_share` the share of those words
    a closed word vocabulary reads as `<unk>` (`zoo.data.corpus.unknown_share`), logged beside
    the per-word figure and kept in the history (None: an open vocabulary). `fit()` resumes from the newest readable
    checkpoint of `out_dir`, runs the `config.schedule(...)` steps, validating at the end of every
    epoch, and returns the history: one entry per validation. In a multi-worker job `out_dir` must be storage every
    worker reads (a shared file system): all workers restore the chief's checkpoints.

    Example: four steps of a tiny model on a few lines (`train` puts the same pieces together
    from a preset and a corpus).

    >>> import tempfile
    >>> from zoo.data import WordTokenizer
    >>> from zoo.training import TrainConfig, Trainer, TrainingWindows, build_model, evaluation_windows
    >>> lines = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "the end"] * 4
    >>> tokenizer = WordTokenizer.build(lines)
    >>> strategy = tf.distribute.get_strategy()
    >>> model, optimizer = build_model("gcnn-ptb", {"vocabulary_size": len(tokenizer), "embedding_dim": 8,
    ...                                             "blocks": [[[2, 8]]]}, tokenizer, strategy)
    >>> config = TrainConfig(global_batch_size=2, seq_len=8, steps=4)
    >>> trainer = Trainer(model, optimizer, strategy, config, TrainingWindows.from_lines(lines, tokenizer, 8, 2),
    ...                   evaluation_windows(lines[:4], tokenizer, 8, model.stream_context, 2),
    ...                   out_dir=tempfile.mkdtemp(), log=lambda line: None)
    >>> history = trainer.fit()
    >>> [entry["step"] for entry in history], history[-1]["val_perplexity"] > 1
    ([4], True)
    >>> sorted(os.listdir(trainer.out_dir))
    ['best', 'checkpoints', 'final', 'history.json', 'logs']
    """

    def __init__(self, model: LanguageModel, optimizer: keras.optimizers.Optimizer,
                 strategy: tf.distribute.Strategy, config: TrainConfig, train_data: TrainingWindows,
                 valid_data: tuple[np.ndarray, np.ndarray, np.ndarray], out_dir: str | os.PathLike,
                 log: Callable[[str], None] = _log, callbacks: Sequence[Callback] = (),
                 valid_words: int | None = None, valid_unknown_share: float | None = None,
                 run_record: dict[str, Any] | None = None):
        self.model, self.optimizer, self.strategy = model, optimizer, strategy
        self.config = config
        self.train_data, self.valid_data = train_data, valid_data
        self.valid_words = valid_words
        self.valid_unknown_share = valid_unknown_share
        self.out_dir = out_dir
        self.run_record = run_record  # `run_identity`, written to OUT/run.json at the first save (None: none)
        self._recorded = False
        self.log = log
        self.callbacks = list(callbacks)
        self.schedule = config.schedule(train_data.batches_per_pass)
        self.chief = distribute.is_chief(strategy)
        self.checkpoint_dir = os.path.join(out_dir, CHECKPOINT_DIR)
        self.history_path = os.path.join(out_dir, "history.json")
        self.history = []
        self.best = math.inf  # the lowest validation perplexity so far (`fit` resumes it from the history)
        with strategy.scope():
            self.step_variable = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.shards = ExpertShards(model, optimizer, strategy)
        # An optimizer built with `use_ema=True` keeps a moving average of the weights (Keras's
        # `ema_momentum`); validation, `best/` and `final/` then use the averaged weights.
        self.averaged = bool(getattr(optimizer, "use_ema", False))
        if self.averaged and self.shards:
            raise ValueError("Weight averaging (use_ema) is not supported with expert parallelism; "
                             "drop use_ema or expert_parallel.")
        self._unsharded = None  # the one-device twin an expert-parallel model's presets are saved from
        self.checkpoint = training_checkpoint(model, optimizer, self.step_variable, self.shards.wholes)
        self.steps = step_functions(model, optimizer, strategy)

    # ---- the pieces of a run ------------------------------------------------------------
    def restore(self) -> int:
        """Restores the newest readable checkpoint and the history up to it; returns its step."""
        os.makedirs(self.out_dir, exist_ok=True)
        start = restore_latest(self.checkpoint, self.checkpoint_dir, self.log)
        if start and self.shards:
            self.shards.after_restore()
        if distribute.is_multi_worker(self.strategy):
            lowest, highest = min_max(self.strategy, start)
            if lowest != highest:
                raise ValueError(
                    f"The workers restored different steps ({lowest} and {highest}): --out "
                    f"({self.out_dir!r}) must be on storage every worker reads, such as a shared file system."
                )
        self.step_variable.assign(start)
        steps = self.schedule.steps
        if start >= steps:
            self.log(f"{checkpoint_path(self.checkpoint_dir, start)} is already at step {start} of {steps}; "
                     "nothing to train.")
        elif start:
            of = "until the time budget ends" if self.schedule.until_budget else f"of {steps}"
            self.log(f"Resuming from {checkpoint_path(self.checkpoint_dir, start)} (step {start} {of}).")
        self.history = []
        if start and os.path.exists(self.history_path):
            with open(self.history_path) as f:
                self.history = [h for h in json.load(f) if h.get("step", 0) <= start]
        return start

    def evaluate(self) -> tuple[float, float | None]:
        """`(per_token, per_word)` validation perplexities: the total NLL over the real tokens of
        `valid_data`, divided by their number or by `valid_words` (None when it is not known)."""
        global_batch_size = self.config.global_batch_size
        index = tf.data.Dataset.range(len(self.valid_data[0])).batch(global_batch_size)
        dataset = self.strategy.distribute_datasets_from_function(
            lambda ctx: shard_rows(index, self.valid_data, global_batch_size, ctx))
        total = count = 0.0
        for batch in dataset:
            t, c = self.steps.evaluate(batch)
            total += float(t)
            count += float(c)
        per_word = math.exp(total / self.valid_words) if self.valid_words else None
        return math.exp(total / max(count, 1.0)), per_word

    def save(self, step: int) -> None:
        """Writes the checkpoint of `step` (every worker must call this)."""
        self.step_variable.assign(step)
        if self.shards:
            self.shards.before_save()
        save_checkpoint(self.checkpoint, self.checkpoint_dir, step, self.config.keep_checkpoints, self.chief)
        if self.run_record is not None and self.chief and not self._recorded:  # what these checkpoints fit
            write_run_record(self.out_dir, self.run_record)
            self._recorded = True

    def save_preset(self, name: str) -> None:
        """Writes the model as the preset directory `out_dir/name` (the chief writes; for an
        expert-parallel model every worker must call this: the experts are gathered whole and
        saved as an ordinary unsharded preset, which `zoo.load` reads on one device)."""
        path = os.path.join(self.out_dir, name)
        if not self.shards:
            if self.chief:
                self.model.save_to_preset(path)
            return
        weights = self.shards.unsharded_weights()
        if not self.chief:
            return
        if self._unsharded is None:
            with tf.init_scope():
                self._unsharded = type(self.model).from_config(self.model.get_config())
                if not self._unsharded.built:
                    self._unsharded.build()
        self._unsharded.tokenizer = self.model.tokenizer
        self._unsharded.set_weights(weights)
        self._unsharded.save_to_preset(path)

    def _swap_averaged_weights(self):
        """Exchanges the model's trainable weights with the optimizer's moving averages of them
        (a second call swaps them back); nothing when the optimizer keeps no averages."""
        variables, averages = compat.optimizer_model_variables(self.optimizer)
        averages = averages if self.averaged else None
        for variable, average in zip(variables, averages or (), strict=bool(averages)):
            if average is not None:
                current = tf.identity(variable.value)
                variable.assign(average.value)
                average.assign(current)

    @contextlib.contextmanager
    def averaged_weights(self) -> Iterator[None]:
        """Inside, the model holds the averaged weights (when the optimizer keeps them); they are
        swapped back on the way out, an error included."""
        self._swap_averaged_weights()
        try:
            yield
        finally:
            self._swap_averaged_weights()

    def train_step(self, iterator: Iterator, step: int) -> float:
        """One optimiser step on the next global batch of `iterator`; returns its loss."""
        loss = float(self.steps.train(iterator))
        if not math.isfinite(loss):
            raise FloatingPointError(f"The loss became {loss} at step {step}; lower the learning rate.")
        return loss

    def validate(self, step: int, loss: float, seconds: float) -> dict[str, Any]:
        """The end of an epoch: the validation perplexity, logged; returns the `history` entry
        (the training metrics since the last validation, and whether it is the best so far)."""
        metrics = metric_results(self.model)
        reset_metrics(self.model)
        val, val_per_word = self.evaluate()
        reset_metrics(self.model)
        entry = {"epoch": -(-step // self.schedule.steps_per_epoch), "step": step, "loss": loss, **metrics,
                 "val_perplexity": val, "seconds": round(seconds, 1), "best": val < self.best}
        if val_per_word is not None:
            entry["val_perplexity_per_word"] = val_per_word
        per_word = f", {val_per_word:.2f} per word" if val_per_word is not None else ""
        if self.valid_unknown_share is not None:
            entry["val_unknown_share"] = self.valid_unknown_share
            per_word += f" ({100 * self.valid_unknown_share:.2f}% of the words <unk>)"
        self.log(f"epoch {entry['epoch']} (step {step}): validation perplexity {val:.2f} per token{per_word}"
                 f"{' (best so far)' if entry['best'] else ''}")
        return entry

    def record(self, entry: dict[str, Any], summaries: Summaries) -> None:
        """Keeps a validation: the best model's preset (`best/`), the history file, the summary."""
        if entry["best"]:
            self.save_preset("best")
        if self.chief:
            self.history.append(entry)
            write_json(self.history_path, self.history)
            summaries.scalars(entry["step"], {"val_perplexity": entry["val_perplexity"]})
        self.best = min(self.best, entry["val_perplexity"])

    # ---- the loop ---------------------------------------------------------------------------
    def fit(self) -> list[dict[str, Any]]:
        """Runs the loop; returns the history (one dict per validation)."""
        schedule = self.schedule
        start = self.restore()
        self.best = min((h["val_perplexity"] for h in self.history), default=math.inf)
        summaries = Summaries(os.path.join(self.out_dir, "logs"), self.chief)
        budget = TimeBudget(self.config.max_minutes, self.strategy)
        train_iter = iter(self.strategy.distribute_datasets_from_function(
            lambda ctx: self.train_data.dataset(start, ctx)))
        progress = ProgressLog(self.model, schedule, self.config.global_batch_size * self.config.seq_len,
                               self.log, summaries)
        if start < schedule.steps:
            self.log(self._announcement(start))
        for callback in self.callbacks:
            callback.on_train_begin(self)
        reset_metrics(self.model)
        step, stopped = start, False
        while step < schedule.steps and not stopped:
            loss = self.train_step(train_iter, step + 1)
            step += 1
            progress.count_step()
            stopped = budget.spent()
            last = step == schedule.steps or stopped
            epoch_end = step % schedule.steps_per_epoch == 0 or last
            if step % schedule.log_every == 0 or epoch_end:
                progress(step, loss)
            if epoch_end:
                with self.averaged_weights():
                    entry = self.validate(step, loss, budget.elapsed())
                    self.record(entry, summaries)
                for callback in self.callbacks:
                    callback.on_validation_end(step, entry)
                progress.restart()  # the next rate leaves validation out
                if not last and budget.spent():  # the budget ran out during this validation: no step after it
                    stopped = last = True
            if step % schedule.checkpoint_every == 0 or last:
                self.save(step)
            for callback in self.callbacks:
                callback.on_step_end(step, loss)
        if stopped:
            self.log(f"Stopped after {budget.max_minutes:g} minute{'' if budget.max_minutes == 1 else 's'} at step {step}.")
        with self.averaged_weights():
            self.save_preset("final")
        summaries.flush()
        for callback in self.callbacks:
            callback.on_train_end(self)
        return self.history

    def _announcement(self, start):
        model, config, schedule = self.model, self.config, self.schedule
        replicas = self.strategy.num_replicas_in_sync
        cpu_alone = isinstance(self.strategy, tf.distribute.MirroredStrategy) and replicas == 1 and \
            all("CPU" in device.upper() for device in self.strategy.extended.worker_devices)
        return (f"Training {type(model).__name__} ({model.count_params():,} parameters) on "
                f"{replicas} replica{'' if replicas == 1 else 's'}"
                + (" (no GPU found: mirrored over the CPU alone)" if cpu_alone else "")
                + f", global batch {config.global_batch_size} × {config.seq_len} tokens, "
                + (f"from step {start + 1}" if schedule.until_budget else f"steps {start + 1}–{schedule.steps}")
                + (f", at most {config.max_minutes:g} minute{'' if config.max_minutes == 1 else 's'}"
                   if config.max_minutes else "") + ".")


# Above this many ids, a model whose preset does not fix its output layer gets an adaptive
# softmax: a full softmax over them dominates the step (`zoo benchmark raw-text`; see
# docs/benchmarks.md). The treebank's 10,002 stay below it.
ADAPTIVE_THRESHOLD = 12_000


def default_cutoffs(vocabulary_size):
    """A head of the 2,000 most frequent ids and tail clusters up to 10,000 and beyond (the
    treebank benchmark's adaptive softmax, `zoo benchmark ptb-softmax`)."""
    return [2_000, 10_000] if vocabulary_size > 10_000 else [vocabulary_size // 4]


@renamed_keywords(vocabulary="tokenizer")
def build_model(preset: str | os.PathLike, overrides: Mapping[str, Any],
                tokenizer: WordTokenizer | CharTokenizer | SubwordTokenizer, strategy: tf.distribute.Strategy,
                policy: str | None = None, capacity_factor: float | None = None
                ) -> tuple[LanguageModel, keras.optimizers.Optimizer]:
    """`(model, optimizer)`: the preset's model with `overrides` and the optimiser its config
    names, built in `strategy`'s scope under the dtype `policy` (a `mixed_float16` optimiser
    scales the loss). With a `capacity_factor`, every `SparseMoE` is expert-parallel
    (`zoo.layers.expert_parallel`); a preset directory's unsharded weights are loaded into it.

    Returns:
        The model, with `tokenizer` attached, and its optimiser, built for its variables.

    Example:

    >>> from zoo.data import WordTokenizer
    >>> from zoo.training import build_model
    >>> tokenizer = WordTokenizer.build(["the cat sat", "the dog sat"])
    >>> model, optimizer = build_model("gcnn-ptb", {"vocabulary_size": len(tokenizer), "embedding_dim": 8,
    ...                                             "blocks": [[[2, 8]]]}, tokenizer, tf.distribute.get_strategy())
    >>> model.tokenizer is tokenizer, optimizer.built, model.vocabulary_size
    (True, True, 8)
    """
    if capacity_factor is not None:
        if policy:
            raise ValueError("Expert parallelism does not support mixed precision yet; train it without "
                             "--mixed-precision.")
        plain = load_model(preset, **overrides).get_weights() if os.path.isdir(str(preset)) else None
    with dtype_policy(policy), strategy.scope():
        if capacity_factor is None:
            model = load_model(preset, **overrides)
        else:
            with expert_parallelism(capacity_factor):
                model = registry.build(preset, **overrides)  # the unsharded weights are set below
            if not any(is_expert_shard(v) for v in model.weights):
                raise ValueError(f"Expert parallelism needs a model with a SparseMoE layer; preset {preset!r} "
                                 "has none (drop --expert-parallel).")
            if plain is not None:
                load_unsharded(model, plain, strategy)
        model.tokenizer = tokenizer
        optimizer = model.make_optimizer()
        if policy == "mixed_float16" and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def starting_point(preset, weights, log=_log):
    """`(preset, PresetInfo, weights file or None)` of `train`'s `preset` and `weights`."""
    if weights not in (None, "random", "trained"):
        if not isinstance(weights, (str, os.PathLike)) or not os.path.isfile(
                os.path.join(str(weights), preset_directory.CONFIG_FILE)):
            missing = "" if not isinstance(weights, (str, os.PathLike)) else \
                " (nothing is there)" if not os.path.exists(weights) else \
                f" (it has no {preset_directory.CONFIG_FILE})" if os.path.isdir(weights) else " (it is a file)"
            raise ValueError(f"weights must be 'trained', 'random' or a preset directory to train from, got "
                             f"{str(weights)!r}{missing}.")
        # a preset directory's model and tokenizer (e.g. converted by `zoo convert fairseq`), with
        # the training defaults of the preset name
        check_not_quantized(weights)
        defaults = {} if os.path.isdir(str(preset)) else resolve_preset(preset).train_defaults
        named = "" if os.path.isdir(str(preset)) else \
            f"; {preset} gives only the training defaults (batch size, window length), not the model"
        log(f"Starting from {weights}: its own model and tokenizer{named}.")
        return str(weights), dataclasses.replace(resolve_preset(str(weights)), train_defaults=defaults), None
    if weights != "trained":
        check_not_quantized(preset)
        return preset, resolve_preset(preset), None
    if os.path.isdir(str(preset)):
        raise ValueError(f"weights='trained' takes a preset name; the preset directory {preset!r} brings "
                         "its own weights (drop --weights).")
    spec = registry.get_preset(preset)
    defaults = resolve_preset(preset).train_defaults  # the preset name's batch and window length
    source = zoo.weights.trained_source(preset)  # one sentence naming the presets that have some, if none
    if os.path.isdir(source):
        check_not_quantized(source)
        log(f"Starting from the trained {preset} ({source}), with its tokenizer.")
        info = resolve_preset(source)
        return source, dataclasses.replace(info, train_defaults=defaults), None
    vocabulary = preset_directory.resolve_tokenizer(spec, spec.config.get("vocabulary_size"))
    if vocabulary is None:
        raise ValueError(f"The trained weights of {preset!r} come without their vocabulary; fine-tune its "
                         "preset directory instead.")
    log(f"Starting from the trained {preset} ({source}), with its own {len(vocabulary):,}-id vocabulary.")
    return preset, PresetInfo(defaults, None, vocabulary), source


def check_not_quantized(preset):
    """Refuses, in one sentence and before anything is written, a start whose weights are
    quantized (a preset directory saved after `model.quantize`): int8 weights have no gradient, so
    training would change only the float32 biases, as `LanguageModel.fit` refuses too."""
    if not os.path.isdir(str(preset)):
        return
    mode = preset_directory.read_config(str(preset))[1].get("quantization")
    if mode is not None:
        raise ValueError(f"The preset directory {str(preset)!r} holds {mode} weights (model.quantize), which have no "
                         "gradient; train from the float32 model it was quantized from, then quantize the result.")


def _corpus(data, preset, info, weights_file, config, overrides, out_dir, log):
    """`(preset, info, weights_file, (train_lines, valid_lines, tokenizer))` of a run: the corpus,
    the tokenizer (extended first with `config.extend_tokenizer`) and, in `overrides`, the
    vocabulary size and the adaptive softmax a large vocabulary gets."""
    train_lines, valid_lines, tokenizer = load_corpus(data, info.tokenizer, info.vocabulary_kind,
                                                      config.min_count, config.max_vocabulary,
                                                      config.tokenizer, config.vocabulary_size, log=log)
    if config.extend_tokenizer is not None:
        preset, info, tokenizer, weights_file = extended_start(preset, info, weights_file, train_lines,
                                                               config.extend_tokenizer, out_dir, log)
    overrides.setdefault("vocabulary_size", len(tokenizer))
    if len(tokenizer) > ADAPTIVE_THRESHOLD and "cutoffs" not in overrides and not info.fixes_head:
        overrides["cutoffs"] = default_cutoffs(len(tokenizer))
        log(f"The vocabulary has {len(tokenizer):,} ids (more than {ADAPTIVE_THRESHOLD:,}): the output layer is "
            f"an adaptive softmax with cutoffs {overrides['cutoffs']} (--set cutoffs=... to choose others, "
            "--set cutoffs=null for a full softmax).")
    return preset, info, weights_file, (train_lines, valid_lines, tokenizer)


def _claim_run_directory(out_dir, model, tokenizer, strategy, config, extended_here, log):
    """The run's identity (`run.json`), after refusing, on every worker alike, a run directory
    holding another run's checkpoints (the directory left as it was)."""
    identity = run_identity(model, tokenizer)
    refusal = run_directory_refusal(out_dir, identity)
    if any_worker(strategy)(refusal is not None):  # every worker refuses, or none
        if extended_here:
            shutil.rmtree(os.path.join(out_dir, EXTENDED_DIR), ignore_errors=True)
        raise ValueError(refusal or f"Another worker found that {out_dir} holds the checkpoints of another run; give "
                                    "a new --out.")
    identity.update(global_batch_size=config.global_batch_size, seq_len=config.seq_len)  # recorded, not refused
    note = batch_change_note(out_dir, identity)
    if note:
        log(note)
    return identity


def train(preset: str | os.PathLike, data: str | os.PathLike = "ptb", out_dir: str | os.PathLike = "runs/model",
          strategy: str | tf.distribute.Strategy = "default", config: TrainConfig | None = None,
          overrides: Mapping[str, Any] | None = None, log: Callable[[str], None] = _log,
          callbacks: Sequence[Callback] = (), weights: str | os.PathLike | None = None
          ) -> tuple[LanguageModel, list[dict[str, Any]]]:
    """Train `preset` (a name or a preset directory) on `data` into `out_dir`; returns
    `(model, history)`.

    `strategy` is a name of `zoo.training.distribute` or a `tf.distribute.Strategy`; `config` a
    `TrainConfig` (default: `TrainConfig()`); `overrides` replace keys of the model's config,
    including its `optimizer` spec (e.g. `{"dropout": 0.1, "optimizer": {"name": "adam"}}`);
    `log` receives every progress line; `callbacks` are `Callback`s. `weights="trained"` starts
    from the trained weights that ship for the preset name (fine-tuning), and a preset directory
    from its model and tokenizer (with the preset name's training defaults): with their tokenizer
    when they ship as a preset directory (`gcnn-en`), else with the preset's own vocabulary (the
    treebank's for `gcnn-ptb`), and with the preset's fine-tuning optimizer where it names one
    (`zoo.registry.Preset.fine_tune_optimizer`, unless `overrides` has an `optimizer`); None or
    "random" start from random weights. With
    `config.extend_tokenizer`, the trained model's subword tokenizer first gains pieces of the
    training text (`zoo.training.extension`). Started again with
    the same arguments, a run resumes from its newest readable checkpoint (see `Trainer`).

    Returns:
        `(model, history)`: the trained model (the weights of the last step; `out_dir/best/` holds
        the preset of the lowest validation perplexity) and one dict per validation.

    Example: a tiny GCNN, four steps on a directory of `train.txt` and `valid.txt`, with a word
    tokenizer learned from it.

    >>> import tempfile
    >>> from zoo.training import TrainConfig, train
    >>> corpus = tempfile.mkdtemp()
    >>> for split, lines in (("train", ["the cat sat on the mat", "the dog sat"] * 8), ("valid", ["the cat sat"])):
    ...     with open(os.path.join(corpus, f"{split}.txt"), "w") as f:
    ...         _ = f.write("\\n".join(lines))
    >>> model, history = train("gcnn-ptb", data=corpus, out_dir=os.path.join(corpus, "run"),
    ...                        config=TrainConfig(global_batch_size=2, seq_len=8, steps=4, tokenizer="word"),
    ...                        overrides={"embedding_dim": 8, "blocks": [[[2, 8]]]}, log=lambda line: None)
    >>> [entry["step"] for entry in history], model.vocabulary_size
    ([4], 10)
    >>> sorted(os.listdir(os.path.join(corpus, "run")))
    ['best', 'checkpoints', 'final', 'history.json', 'logs', 'run.json']
    """
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a zoo.training.TrainConfig, got {type(config).__name__}.")
    blocking = preset_directory.file_in_the_way(out_dir)
    if blocking is not None:
        raise ValueError(f"The run directory {out_dir} cannot be made: {blocking} is a file; give --out a new "
                         "directory, or the run directory of the run to resume.")
    overrides = dict(overrides or {})
    if isinstance(strategy, str):
        strategy = distribute.get_strategy(strategy)  # first: it configures the collectives
    name = preset
    preset, info, weights_file = starting_point(preset, weights, log)
    spec = registry.fine_tune_optimizer(name) if weights == "trained" and "optimizer" not in overrides else None
    if spec is not None:
        overrides["optimizer"] = spec
        log(f"Fine-tuning with {name}'s fine-tuning optimizer, {json.dumps(overrides['optimizer'])} "
            "(--set optimizer=... for another).")
    config = config.with_defaults(info.train_defaults)
    config.check_replicas(strategy.num_replicas_in_sync)
    if config.extend_tokenizer is not None:
        check_start(preset, weights, info, config.extend_tokenizer)

    extended_here = config.extend_tokenizer is not None and not os.path.exists(os.path.join(out_dir, EXTENDED_DIR))
    preset, info, weights_file, (train_lines, valid_lines, vocabulary) = _corpus(
        data, preset, info, weights_file, config, overrides, out_dir, log)
    keras.utils.set_random_seed(config.seed)
    model, optimizer = build_model(preset, overrides, vocabulary, strategy,
                                   mixed_precision_policy(config.mixed_precision),
                                   config.capacity_factor if config.expert_parallel else None)
    if weights_file is not None:
        preset_directory.load_weights(model, weights_file)
    windows = TrainingWindows.from_lines(train_lines, vocabulary, config.seq_len, config.global_batch_size,
                                         config.seed)
    valid = evaluation_windows(valid_lines, vocabulary, config.seq_len, model.stream_context,
                               config.global_batch_size)
    share = unknown_share(valid_lines, vocabulary)
    if share is not None:
        log(f"Validation: {unknown_note(share)}; its per-word perplexity is not comparable with an "
            "open-vocabulary (subword) model's (docs/data-and-tokenizers.md).")
    identity = _claim_run_directory(out_dir, model, vocabulary, strategy, config, extended_here, log)
    trainer = Trainer(model, optimizer, strategy, config, windows, valid, out_dir, log=log, callbacks=callbacks,
                      valid_words=scored_words(valid_lines), valid_unknown_share=share, run_record=identity)
    return model, trainer.fit()

