"""`TrainConfig`: every option of a training run, checked in one place."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import NamedTuple

from zoo.layers.expert_parallel import check_capacity_factor
from zoo.layers.validation import check_int

UNBOUNDED = math.inf


class Schedule(NamedTuple):
    """What the loop does with a config and the number of global batches in one pass over the
    data (`TrainConfig.schedule`): `steps` in all (`UNBOUNDED`, infinity, when only a time budget
    ends the run: `until_budget`), the steps of an epoch (validation after each), and the steps
    between checkpoints and between progress lines.

    Example: 10 epochs of 40 batches, a checkpoint every epoch and a line every 10 steps.

    >>> from zoo.training import TrainConfig
    >>> TrainConfig(epochs=10).schedule(batches_per_pass=40)
    Schedule(steps=400, steps_per_epoch=40, checkpoint_every=40, log_every=10, until_budget=False)
    >>> TrainConfig(max_minutes=5).schedule(batches_per_pass=40).steps  # until the budget is spent
    inf
    """

    steps: int | float
    steps_per_epoch: int
    checkpoint_every: int
    log_every: int
    until_budget: bool

_POSITIVE_INTS = ("global_batch_size", "seq_len", "steps", "epochs", "steps_per_epoch",
                  "checkpoint_every", "keep_checkpoints", "log_every", "vocabulary_size", "extend_tokenizer")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The options of a training run (the model's own config is the preset's, with overrides).

    - `global_batch_size`: sequences per step over all replicas together (a multiple of their
      number); `seq_len`: tokens per training window. Unset, both are the preset's defaults.
    - `steps`: total training steps; else `epochs` × `steps_per_epoch` (an epoch is one pass over
      the data unless `steps_per_epoch` says otherwise; one epoch when neither `steps` nor
      `epochs` is given, or as many as fit when `max_minutes` is); training stops early once
      `max_minutes` have passed. Validation runs at the end of every epoch.
    - `checkpoint_every`: steps between checkpoints (default: every epoch; one is also written at
      the end); `keep_checkpoints`: how many to keep.
    - `mixed_precision`: False, True (`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU) or one
      of those policy names.
    - `seed`: the seed of the weights, the data order and the random layers.
    - `log_every`: steps between progress lines (default: a quarter of an epoch, at most 100).
    - `min_count`, `max_vocabulary`: a word vocabulary built from the corpus (a preset name only;
      a preset directory brings its own tokenizer).
    - `tokenizer`: "word", "char" or "subword"; unset, raw text gets a learned subword vocabulary
      of `vocabulary_size` ids (default `zoo.training.data.DEFAULT_SUBWORD_SIZE`, 16,000), the Penn
      Treebank and the WikiText files keep the word vocabulary their protocol fixes, and a
      character preset its characters (see `zoo.training.data.choose_tokenizer`).
    - `expert_parallel`: shard every `SparseMoE`'s experts over the replicas (replica r holds
      experts [r·E/R, (r+1)·E/R), tokens exchanged by all-to-all; `zoo.layers.expert_parallel`),
      which needs more than one replica; `capacity_factor`: each (replica, expert) pair takes
      up to ceil(capacity_factor · tokens per replica · k / E) assignments a step, the rest are
      dropped and counted.
    - `extend_tokenizer`: fine-tuning a trained subword model, add up to this many ids to its
      tokenizer for pieces of the training text it lacks, their rows started from the pieces they
      replace (`zoo.training.extension`, `zoo.models.extend`).

    Example:

    >>> from zoo.training import TrainConfig
    >>> config = TrainConfig(global_batch_size=64, steps=1_000, max_minutes=30)
    >>> config.with_defaults({"seq_len": 35}).seq_len  # unset: the preset's default
    35
    >>> config.schedule(batches_per_pass=250).steps_per_epoch  # validation after every pass
    250
    >>> TrainConfig(global_batch_size=0)
    Traceback (most recent call last):
    ...
    ValueError: global_batch_size must be ... got 0.
    """

    global_batch_size: int | None = None
    seq_len: int | None = None
    steps: int | None = None
    epochs: int | None = None
    steps_per_epoch: int | None = None
    max_minutes: float | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int | None = 3
    mixed_precision: bool | str = False
    seed: int = 0
    log_every: int | None = None
    min_count: int = 1
    max_vocabulary: int | None = None
    tokenizer: str | None = None
    vocabulary_size: int | None = None
    expert_parallel: bool = False
    capacity_factor: float = 2.0
    extend_tokenizer: int | None = None

    def __post_init__(self):
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, minimum=1)
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be > 0, got {self.max_minutes}.")
        if not isinstance(self.expert_parallel, bool):
            raise ValueError(f"expert_parallel must be True or False, got {self.expert_parallel!r}.")
        check_capacity_factor(self.capacity_factor)
        check_int("seed", self.seed, minimum=0, maximum=2**32 - 1)  # what keras.utils.set_random_seed takes

    def with_defaults(self, defaults: Mapping[str, int]) -> TrainConfig:
        """This config with an unset `global_batch_size` and `seq_len` taken from `defaults` (a
        preset's train defaults, keyed by these names), else 32 and 64."""
        return dataclasses.replace(
            self,
            global_batch_size=(self.global_batch_size if self.global_batch_size is not None
                               else defaults.get("global_batch_size", 32)),
            seq_len=self.seq_len if self.seq_len is not None else defaults.get("seq_len", 64),
        )

    def check_replicas(self, replicas: int) -> None:
        """Refuses a global batch the `replicas` in sync cannot share evenly, and expert
        parallelism on one replica."""
        if self.expert_parallel and replicas < 2:
            raise ValueError(
                f"Expert parallelism needs a strategy with more than one replica, got {replicas}; use "
                "--strategy mirrored over several devices or multi_worker_mirrored, or drop --expert-parallel.")
        if self.global_batch_size % replicas:
            raise ValueError(
                f"The global batch size {self.global_batch_size} is not divisible by the {replicas} "
                f"replicas in sync; use a multiple of {replicas}."
            )

    def schedule(self, batches_per_pass: int) -> Schedule:
        """The run's `Schedule`, given how many global batches one pass over the data holds."""
        steps_per_epoch = self.steps_per_epoch or batches_per_pass
        until_budget = self.steps is None and self.epochs is None and self.max_minutes is not None
        if until_budget:
            steps = UNBOUNDED
        elif self.steps is not None:
            steps = self.steps
        else:
            steps = steps_per_epoch * (self.epochs or 1)
        return Schedule(
            steps=steps,
            steps_per_epoch=steps_per_epoch,
            checkpoint_every=self.checkpoint_every or steps_per_epoch,
            log_every=self.log_every or max(1, min(100, steps_per_epoch // 4 or 1)),
            until_budget=until_budget,
        )
