"""Checkpoints of a run: what one holds, listing them, restoring the newest that reads back, and
saving with keep-N.

`tf.train.CheckpointManager` saves and keeps the newest N (with its state file,
`checkpoints/checkpoint`), as Orbit's loops use it. Around it, what the zoo adds: a restart
resumes from the newest checkpoint that reads back, falling back past a corrupt or half-written
one with a message, found from the checkpoint files themselves (the manager's state lags a save
cut before its state update, and a run written before the zoo used the manager has none); the
data position (the step) is part of the checkpoint; and in a multi-worker job every worker takes
part in a save (reading synchronised variables is a collective) while only the chief's copy is
kept.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from zoo.errors import reason
from zoo.files import write_json

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "ckpt"
_CHECKPOINT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")


def random_states(model: keras.Model) -> list[keras.Variable]:
    """The state variables of every random generator in the model (dropout masks, MoE gating
    noise): part of a checkpoint, so a resumed run draws the numbers an unbroken one would.

    Keras 3 documents `model.variables` as all layer state including the random seeds, and
    `model.weights` as excluding them: the generators' states are the difference (by identity).

    Returns:
        Those variables, in the model's order.

    Example: a GCNN with dropout holds one generator's state per dropout layer (the embedding's
    and each block's); without, none.

    >>> import zoo
    >>> blocks = [[[2, 8]], [[2, 8]]]
    >>> len(random_states(zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=blocks)))
    0
    >>> model = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=blocks, dropout=0.1)
    >>> [tuple(v.shape) for v in random_states(model)]
    [(2,), (2,), (2,)]
    """
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def training_checkpoint(model: keras.Model, optimizer: keras.optimizers.Optimizer, step: tf.Variable,
                        experts: Sequence[tf.Variable] = ()) -> tf.train.Checkpoint:
    """The `tf.train.Checkpoint` of a run: the model, the optimiser's slots, the step variable,
    the random generators' states and, for an expert-parallel run, the whole expert tensors
    (`zoo.training.sharding.ExpertShards.wholes`).

    Returns:
        The checkpoint object, to `save_checkpoint` and `restore_latest`.

    Example: save a run at step 30, change the step, and restore it.

    >>> import tempfile, zoo
    >>> model = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[2, 8]]])
    >>> optimizer = keras.optimizers.Adam()
    >>> optimizer.build(model.trainable_variables)
    >>> step = tf.Variable(30, dtype=tf.int64)
    >>> checkpoint = training_checkpoint(model, optimizer, step)
    >>> directory = tempfile.mkdtemp()
    >>> save_checkpoint(checkpoint, directory, 30, keep=3, chief=True)
    >>> _ = step.assign(0)
    >>> restore_latest(checkpoint, directory, log=lambda line: None), int(step)
    (30, 30)
    """
    extra = {"experts": list(experts)} if experts else {}
    return tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, random=random_states(model), **extra)


def checkpoint_steps(directory: str | os.PathLike) -> list[int]:
    """Steps of the checkpoints in `directory` whose index file exists, newest first (a save
    killed before its index was written is not a checkpoint). Read from the files, not from the
    `CheckpointManager`'s state, which lags a save cut between its write and its state update and
    does not exist in a run written before the zoo used the manager.

    Returns:
        The steps, newest first; empty for a directory without checkpoints (or none at all).

    Example:

    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> for name in ("ckpt-100.index", "ckpt-100.data-00000-of-00001", "ckpt-200.index",
    ...              "ckpt-300.data-00000-of-00001"):
    ...     open(os.path.join(directory, name), "w").close()
    >>> checkpoint_steps(directory)  # ckpt-300 has no index: its save was cut short
    [200, 100]
    """
    steps = []
    for path in glob.glob(os.path.join(directory, f"{CHECKPOINT_PREFIX}-*.index")):
        match = _CHECKPOINT_INDEX.match(os.path.basename(path))
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps, reverse=True)


def checkpoint_path(directory: str | os.PathLike, step: int) -> str:
    """The path prefix of the checkpoint of `step` in `directory` (its files add `.index` and
    `.data-…`).

    Returns:
        `directory/ckpt-<step>`.

    Example:

    >>> checkpoint_path(os.path.join("runs", "gcnn", "checkpoints"), 1200).split(os.sep)
    ['runs', 'gcnn', 'checkpoints', 'ckpt-1200']
    """
    return os.path.join(directory, f"{CHECKPOINT_PREFIX}-{step}")


def restore_latest(checkpoint: tf.train.Checkpoint, directory: str | os.PathLike, log: Callable[[str], None]) -> int:
    """Restores the newest readable checkpoint of `directory`; returns its step, or 0.

    A checkpoint that fails to read (truncated data, a corrupt index, missing shards) is reported
    in one line and the next older one is tried; if none reads, training starts from step 0 and
    says so.

    Returns:
        The step of the checkpoint restored, or 0 when none was.

    Example: the newest checkpoint is corrupt, so the one before it is restored.

    >>> import tempfile
    >>> step = tf.Variable(0, dtype=tf.int64)
    >>> checkpoint, directory = tf.train.Checkpoint(step=step), tempfile.mkdtemp()
    >>> for s in (10, 20):
    ...     _ = step.assign(s)
    ...     save_checkpoint(checkpoint, directory, s, keep=None, chief=True)
    >>> with open(checkpoint_path(directory, 20) + ".index", "wb") as f:
    ...     _ = f.write(b"not a checkpoint")
    >>> restore_latest(checkpoint, directory, log=lambda line: None), int(step)
    (10, 10)
    """
    steps = checkpoint_steps(directory)
    for step in steps:
        path = checkpoint_path(directory, step)
        try:
            checkpoint.read(path).assert_existing_objects_matched()
            return step
        except Exception as e:  # TF raises DataLossError, NotFoundError, InvalidArgumentError, ...
            log(f"Checkpoint {path} is unreadable ({type(e).__name__}: {reason(e)[:200]}); "
                "falling back to the previous checkpoint.")
    if steps:
        log(f"No checkpoint in {directory} could be read ({len(steps)} tried); starting from step 0.")
    return 0


def save_checkpoint(checkpoint: tf.train.Checkpoint, directory: str | os.PathLike, step: int, keep: int | None,
                    chief: bool) -> None:
    """Writes `ckpt-<step>` with a `tf.train.CheckpointManager` that keeps the newest `keep` (None:
    all), and deletes the files of any checkpoint beyond the newest `keep` that it does not list (a
    run written before the zoo used the manager). Every worker of
    a job must call this (the save reads synchronised variables); a non-chief writes to a scratch
    directory and deletes it.

    Example: three saves, the newest two kept.

    >>> import tempfile
    >>> step = tf.Variable(0, dtype=tf.int64)
    >>> checkpoint, directory = tf.train.Checkpoint(step=step), tempfile.mkdtemp()
    >>> for s in (10, 20, 30):
    ...     _ = step.assign(s)
    ...     save_checkpoint(checkpoint, directory, s, keep=2, chief=True)
    >>> checkpoint_steps(directory)
    [30, 20]
    """
    target = directory if chief else os.path.join(directory, f".worker-{os.getpid()}")
    manager = tf.train.CheckpointManager(checkpoint, target, max_to_keep=keep, checkpoint_name=CHECKPOINT_PREFIX)
    manager.save(checkpoint_number=step)
    if not chief:
        shutil.rmtree(target, ignore_errors=True)
        return
    if keep is None:
        return
    kept = {os.path.basename(p) for p in manager.checkpoints}
    for old in checkpoint_steps(directory)[keep:]:  # beyond the newest `keep`, the manager's or not
        if os.path.basename(checkpoint_path(directory, old)) not in kept:
            for path in glob.glob(checkpoint_path(directory, old) + ".*"):
                os.remove(path)


# ---- which run a directory's checkpoints belong to ----------------------------------------------
RUN_RECORD = "run.json"  # in the run directory, beside checkpoints/


def run_identity(model, tokenizer):
    """What a run's checkpoints fit: the model's weights (their shapes, in order) and its tokenizer (a
    digest of the files it saves), as `OUT/run.json` records them."""
    import hashlib
    import tempfile

    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="zoo-run-tokenizer-") as saved:
        tokenizer.save(saved)
        for name in sorted(os.listdir(saved)):
            digest.update(name.encode("utf-8") + b"\0")
            with open(os.path.join(saved, name), "rb") as f:
                digest.update(f.read())
    # shapes, not names: Keras numbers a second model's name in one process ("…_1")
    return {"model": type(model).__name__, "weights": [list(w.shape) for w in model.weights],
            "tokenizer": type(tokenizer).__name__, "vocabulary_size": len(tokenizer),
            "tokenizer_sha256": digest.hexdigest()}


def recorded_run(out_dir):
    """The record (`run.json`) of the run whose checkpoints `out_dir` holds; None where it has no
    checkpoint, no record (an earlier version's run) or an unreadable one."""
    path = os.path.join(out_dir, RUN_RECORD)
    if not checkpoint_steps(os.path.join(out_dir, CHECKPOINT_DIR)) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_directory_refusal(out_dir, identity):
    """The sentence refusing to continue into `out_dir` when its checkpoints belong to another
    run, else None: a run started with another corpus, tokenizer or model (`run_identity`) would
    otherwise restore none of them, start again from step 0 and leave the two runs' checkpoints,
    history and `best/` mixed. A directory of an earlier version, with checkpoints and no record,
    is taken as it is."""
    recorded = recorded_run(out_dir)
    if recorded is None:
        return None
    if recorded.get("tokenizer_sha256") != identity["tokenizer_sha256"]:
        size = recorded.get("vocabulary_size")
        what = (f"another tokenizer (a {recorded.get('tokenizer', 'tokenizer')} of "
                + (f"{size:,} ids" if isinstance(size, int) else "other ids")
                + " made from other text or with other tokenizer settings)")
    elif recorded.get("model") != identity["model"]:
        what = f"another kind of model (a {recorded.get('model', '?')}, this run a {identity['model']})"
    elif recorded.get("weights") != identity["weights"]:
        what = f"another model (a {recorded.get('model', '?')} with weights of other shapes)"
    else:
        return None
    return (f"{out_dir} holds the checkpoints of a run with {what}; give a new --out, or delete {out_dir} "
            "to start over.")


def batch_change_note(out_dir, identity):
    """A line saying that a run resumes with another global batch or window length than the
    one its record holds (what each step reads from then on is the new batch's, and its epochs
    are counted in the new batch's passes), else None."""
    recorded = recorded_run(out_dir)
    if recorded is None:
        return None
    before = (recorded.get("global_batch_size"), recorded.get("seq_len"))
    now = (identity.get("global_batch_size"), identity.get("seq_len"))
    if None in before or before == now:
        return None
    return (f"Resuming with a global batch of {now[0]} × {now[1]} tokens where the run began with {before[0]} × "
            f"{before[1]}: from here each step reads the new batch's windows, and epochs count its passes.")


def write_run_record(out_dir, identity):
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, RUN_RECORD), identity)
