"""Checkpoints of a run: what one holds, listing them, restoring the newest that reads back, and
saving with keep-N.

This is where a loop of our own does what Orbit delegates to `tf.train.CheckpointManager`: a
restart resumes from the newest checkpoint that reads back, falling back past a corrupt or
half-written one with a message; the data position (the step) is part of the checkpoint; and in
a multi-worker job every worker takes part in a save (reading synchronised variables is a
collective) while only the chief's copy is kept.
"""

import glob
import os
import re
import shutil

import tensorflow as tf

from zoo.errors import reason

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "ckpt"
_CHECKPOINT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")


def random_states(model):
    """The state variables of every random generator in the model (dropout masks, MoE gating
    noise): part of a checkpoint, so a resumed run draws the numbers an unbroken one would.

    Keras 3 documents `model.variables` as all layer state including the random seeds, and
    `model.weights` as excluding them: the generators' states are the difference (by identity)."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def training_checkpoint(model, optimizer, step, experts=()):
    """The `tf.train.Checkpoint` of a run: the model, the optimiser's slots, the step variable,
    the random generators' states and, for an expert-parallel run, the whole expert tensors
    (`zoo.training.sharding.ExpertShards.wholes`)."""
    extra = {"experts": list(experts)} if experts else {}
    return tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, random=random_states(model), **extra)


def checkpoint_steps(directory):
    """Steps of the checkpoints in `directory` whose index file exists, newest first (a save
    killed before its index was written is not a checkpoint)."""
    steps = []
    for path in glob.glob(os.path.join(directory, f"{CHECKPOINT_PREFIX}-*.index")):
        match = _CHECKPOINT_INDEX.match(os.path.basename(path))
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps, reverse=True)


def checkpoint_path(directory, step):
    return os.path.join(directory, f"{CHECKPOINT_PREFIX}-{step}")


def restore_latest(checkpoint, directory, log):
    """Restores the newest readable checkpoint of `directory`; returns its step, or 0.

    A checkpoint that fails to read (truncated data, a corrupt index, missing shards) is reported
    in one line and the next older one is tried; if none reads, training starts from step 0 and
    says so."""
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


def save_checkpoint(checkpoint, directory, step, keep, chief):
    """Writes `ckpt-<step>` and deletes all but the newest `keep`. Every worker of a job must
    call this (the save reads synchronised variables); a non-chief writes to a scratch
    directory and deletes it."""
    target = directory if chief else os.path.join(directory, f".worker-{os.getpid()}")
    os.makedirs(target, exist_ok=True)
    checkpoint.write(checkpoint_path(target, step))
    if not chief:
        shutil.rmtree(target, ignore_errors=True)
        return
    for old in checkpoint_steps(directory)[keep:]:
        for path in glob.glob(checkpoint_path(directory, old) + ".*"):
            os.remove(path)
