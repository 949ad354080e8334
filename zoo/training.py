"""`zoo train`: a preset, a corpus and a strategy in; checkpoints and a trained preset out.

One loop serves every strategy (`zoo.distribute`): one device, `MirroredStrategy` on one
machine, `MultiWorkerMirroredStrategy` across machines, where Keras 3's `fit` does not work
(keras-team/keras#20585). It is a small loop of our own rather than Orbit's `Controller`, because
what it must guarantee sits exactly where Orbit delegates to `tf.train.CheckpointManager`: a
restart resumes from the newest checkpoint that reads back, falling back past a corrupt or
half-written one with a message; the data position is part of the checkpoint; and in a
multi-worker job every worker takes part in a save (reading synchronised variables is a
collective) while only the chief's copy is kept.

The run directory holds:
- `checkpoints/ckpt-<step>.*`: model weights, optimiser slots, the random generators' states
  (dropout, MoE gating noise) and the step; the newest `keep_checkpoints` are kept;
- `history.json`: one entry per validation ("epoch"), with the step it was taken at;
- `logs/`: TensorBoard summaries; `best/`: the preset of the lowest validation perplexity;
  `final/`: the preset at the last step. Only the chief writes them.

Exactness: the loss of a step is the mean over the real tokens of the *global* batch (each
replica divides its token sum by the all-reduced token count), the gradients are all-reduced
before the optimiser clips them, so a step on N replicas is the step one device takes on the
same global batch, and the data order depends on the step alone, never on the number of
workers (`TrainingWindows`).
"""

import glob
import json
import math
import os
import re
import shutil
import time

import keras
import numpy as np
import tensorflow as tf

from zoo import distribute, registry
from zoo.data import pipeline
from zoo.data.corpus import read_lines
from zoo.data.datasets import build_vocabulary

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "ckpt"
_CHECKPOINT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")


# ---- data -------------------------------------------------------------------------------------
class TrainingWindows:
    """The training stream cut into windows, served in global batches whose order is a pure
    function of the step.

    Pass p over the data (an "epoch" of the stream) visits the windows in the order of a
    permutation drawn from the stateless seed `(seed, p)`, in `batches_per_pass` global batches
    (the last incomplete one dropped). So the batch of step s is known from s alone: a resumed
    run starts its dataset at its checkpoint's step, and a job of any number of workers sees the
    global batches a single process sees, each worker taking its slice of every batch.
    """

    def __init__(self, inputs, targets, weights, global_batch_size, seed=0):
        self.arrays = (inputs, targets, weights)
        self.global_batch_size = global_batch_size
        self.seed = seed
        self.batches_per_pass = len(inputs) // global_batch_size
        if self.batches_per_pass < 1:
            raise ValueError(
                f"The training data has {len(inputs)} windows, fewer than one global batch of "
                f"{global_batch_size}; use a smaller --global-batch-size or --seq-len, or more data."
            )

    def _order(self, p):
        n = len(self.arrays[0])
        keys = tf.random.stateless_uniform([n], seed=tf.stack([tf.constant(self.seed, tf.int64), p]))
        used = self.batches_per_pass * self.global_batch_size
        return tf.reshape(tf.argsort(keys)[:used], (self.batches_per_pass, self.global_batch_size))

    def dataset(self, start_step, context):
        """The dataset of one input pipeline (`tf.distribute.InputContext`), from `start_step`."""
        first_pass, offset = divmod(int(start_step), self.batches_per_pass)
        passes = tf.data.Dataset.range(first_pass, 2**62)
        batches = passes.flat_map(lambda p: tf.data.Dataset.from_tensor_slices(self._order(p)))
        return shard_rows(batches.skip(offset), self.arrays, self.global_batch_size, context)


def shard_rows(index_batches, arrays, global_batch_size, context):
    """Per-replica batches of `arrays` rows from a dataset of global batches of row indices.

    Worker w of W takes rows [w·B/W, (w+1)·B/W) of every global batch, and its local replicas
    consecutive slices of those, so replica r of the job holds rows [r·B/R, (r+1)·B/R)."""
    workers, worker = context.num_input_pipelines, context.input_pipeline_id
    per_worker = global_batch_size // workers
    per_replica = context.get_per_replica_batch_size(global_batch_size)
    tensors = tuple(tf.constant(a) for a in arrays)
    ds = index_batches.map(lambda idx: idx[worker * per_worker:(worker + 1) * per_worker])
    ds = ds.unbatch().batch(per_replica, drop_remainder=True)
    ds = ds.map(lambda idx: tuple(tf.gather(t, idx) for t in tensors),
                num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def evaluation_windows(lines, vocabulary, seq_len, context, global_batch_size):
    """Stream windows with `context` tokens of unscored left context, padded with weight-0
    windows to a whole number of global batches, so every replica sees the same number of
    batches (a collective step needs every worker)."""
    ids = pipeline.stream_ids(lines, vocabulary)
    inputs, targets, weights = pipeline.stream_windows(ids, seq_len, context, vocabulary.bos_id)
    pad = -len(inputs) % global_batch_size
    if pad:
        inputs, targets, weights = (
            np.concatenate([a, np.zeros((pad,) + a.shape[1:], a.dtype)]) for a in (inputs, targets, weights)
        )
    return inputs, targets, weights


# ---- checkpoints -------------------------------------------------------------------------------
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
            reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            log(f"Checkpoint {path} is unreadable ({type(e).__name__}: {reason}); "
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


def random_states(model):
    """The state variables of every random generator in the model (dropout masks, MoE gating
    noise): part of a checkpoint, so a resumed run draws the numbers an unbroken one would."""
    states = []
    for layer in model._flatten_layers(include_self=True):
        for generator in getattr(layer, "_seed_generators", []):
            states.append(generator.state)
    return states


# ---- the loop ----------------------------------------------------------------------------------
def load_corpus(preset, data, min_count=1, max_vocabulary=None):
    """The corpus' train/valid lines and the vocabulary to train with."""
    spec = registry.preset_spec(preset) if not os.path.isdir(preset) else {}
    train_lines = read_lines(data, "train")
    valid_lines = read_lines(data, "valid")
    if os.path.isdir(preset):
        vocabulary = registry.load_vocabulary_if_any(preset)
        if vocabulary is None:
            raise ValueError(f"The preset directory {preset!r} has no vocabulary to train with.")
    else:
        vocabulary = build_vocabulary(data, spec.get("vocabulary", "word"), min_count, max_vocabulary)
    return train_lines, valid_lines, vocabulary


def mixed_precision_policy(enabled):
    """`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU (no loss scaling needed); the output
    layers compute their log-softmax and the loss in float32 whatever the policy."""
    if not enabled:
        return None
    if enabled in ("mixed_float16", "mixed_bfloat16"):
        return enabled
    return "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"


def _print(message):
    print(message, flush=True)


def train(preset, data="ptb", out_dir="runs/model", strategy="default", global_batch_size=None,
          seq_len=None, steps=None, epochs=None, steps_per_epoch=None, max_minutes=None,
          checkpoint_every=None, keep_checkpoints=3, mixed_precision=False, optimizer=None,
          seed=0, log_every=None, min_count=1, max_vocabulary=None, log=_print,
          batch_size=None, on_step=None, **overrides):
    """Train `preset` on `data` into `out_dir`; returns `(model, history)`.

    Training runs `steps` steps, or `epochs` × `steps_per_epoch` (an epoch is one pass over the
    data unless `steps_per_epoch` says otherwise), stopping early once `max_minutes` have passed.
    Validation perplexity is measured at the end of every epoch. A checkpoint is written every
    `checkpoint_every` steps (default: every epoch) and at the end; started again with the same
    arguments, a run resumes from its newest readable checkpoint. `batch_size` is an alias of
    `global_batch_size`. `on_step(step, loss)` is called after every step (and its checkpoint, if
    any).

    In a multi-worker job `out_dir` must be storage every worker reads (a shared file system):
    all workers restore the chief's checkpoints.
    """
    if isinstance(optimizer, dict):  # an optimizer spec (e.g. from `--set optimizer=...`)
        overrides["optimizer"], optimizer = optimizer, None
    if isinstance(strategy, str):
        strategy = distribute.get_strategy(strategy)  # first: it configures the collectives
    chief = distribute.is_chief(strategy)
    replicas = strategy.num_replicas_in_sync
    spec = registry.PRESETS.get(preset, {}).get("train", {})
    if global_batch_size is None:
        global_batch_size = batch_size if batch_size is not None else spec.get("batch_size", 32)
    if seq_len is None:
        seq_len = spec.get("seq_len", 64)
    for name, value in (("global_batch_size", global_batch_size), ("seq_len", seq_len),
                        ("steps", steps), ("epochs", epochs), ("steps_per_epoch", steps_per_epoch),
                        ("checkpoint_every", checkpoint_every), ("keep_checkpoints", keep_checkpoints),
                        ("log_every", log_every)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    if max_minutes is not None and max_minutes <= 0:
        raise ValueError(f"max_minutes must be > 0, got {max_minutes}.")
    if global_batch_size % replicas:
        raise ValueError(
            f"The global batch size {global_batch_size} is not divisible by the {replicas} replicas "
            f"in sync; use a multiple of {replicas}."
        )

    train_lines, valid_lines, vocabulary = load_corpus(preset, data, min_count, max_vocabulary)
    overrides.setdefault("vocabulary_size", len(vocabulary))
    keras.utils.set_random_seed(seed)
    policy = mixed_precision_policy(mixed_precision)
    previous_policy = keras.config.dtype_policy()
    if policy:
        keras.config.set_dtype_policy(policy)
    try:
        with strategy.scope():
            model = registry.load(preset, **overrides)
            model.vocabulary = vocabulary
            model(keras.KerasTensor((None, seq_len), "int32"))  # builds every layer, runs nothing
            model.build()
            opt = optimizer if optimizer is not None else model.make_optimizer()
            if policy == "mixed_float16" and not isinstance(opt, keras.optimizers.LossScaleOptimizer):
                opt = keras.optimizers.LossScaleOptimizer(opt)
            opt.build(model.trainable_variables)
            step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    finally:
        keras.config.set_dtype_policy(previous_policy)
    # The loop all-reduces the gradients itself, before the optimiser clips them (Keras would
    # clip each replica's share, then sum); so the optimiser's own all-reduce is switched off.
    for o in (opt, getattr(opt, "inner_optimizer", None)):
        if o is not None:
            o._all_reduce_sum_gradients = lambda grads_and_vars: grads_and_vars

    ids = pipeline.stream_ids(train_lines, vocabulary)
    windows = TrainingWindows(*pipeline.stream_windows(ids, seq_len, 0, vocabulary.bos_id),
                              global_batch_size, seed)
    steps_per_epoch = steps_per_epoch or windows.batches_per_pass
    until_budget = steps is None and epochs is None and max_minutes is not None
    if steps is None:
        steps = steps_per_epoch * (epochs or (10**6 if max_minutes else 1))
    checkpoint_every = checkpoint_every or steps_per_epoch
    log_every = log_every or max(1, min(100, steps_per_epoch // 4 or 1))
    valid_arrays = evaluation_windows(valid_lines, vocabulary, seq_len, model.stream_context,
                                      global_batch_size)

    checkpoint = tf.train.Checkpoint(model=model, optimizer=opt, step=step_var,
                                     random=random_states(model))
    checkpoint_dir = os.path.join(out_dir, CHECKPOINT_DIR)
    os.makedirs(out_dir, exist_ok=True)
    start = restore_latest(checkpoint, checkpoint_dir, log)
    if distribute.is_multi_worker(strategy):
        lowest, highest = _agree_min_max(strategy, start)
        if lowest != highest:
            raise ValueError(
                f"The workers restored different steps ({lowest} and {highest}): --out "
                f"({out_dir!r}) must be on storage every worker reads, such as a shared file system."
            )
    step_var.assign(start)
    if start >= steps:
        log(f"{checkpoint_path(checkpoint_dir, start)} is already at step {start} of {steps}; "
            "nothing to train.")
    elif start:
        log(f"Resuming from {checkpoint_path(checkpoint_dir, start)} (step {start} of {steps}).")

    history_path = os.path.join(out_dir, "history.json")
    history = []
    if start and os.path.exists(history_path):
        with open(history_path) as f:
            history = [h for h in json.load(f) if h.get("step", 0) <= start]
    best = min((h["val_perplexity"] for h in history), default=math.inf)
    writer = tf.summary.create_file_writer(os.path.join(out_dir, "logs")) if chief else None

    train_fn, eval_fn = _step_functions(model, opt, strategy)
    agree = _agreement(strategy)
    train_iter = iter(strategy.distribute_datasets_from_function(lambda ctx: windows.dataset(start, ctx)))

    def evaluate():
        index = tf.data.Dataset.range(len(valid_arrays[0])).batch(global_batch_size)
        dataset = strategy.distribute_datasets_from_function(
            lambda ctx: shard_rows(index, valid_arrays, global_batch_size, ctx))
        total = count = 0.0
        for batch in dataset:
            t, c = eval_fn(batch)
            total += float(t)
            count += float(c)
        return math.exp(total / max(count, 1.0))

    budget = max_minutes * 60.0 if max_minutes else None
    began = time.monotonic()
    window_start, window_tokens = time.monotonic(), 0
    tokens_per_step = global_batch_size * seq_len
    step = start
    stopped = False
    if start < steps:
        log(f"Training {type(model).__name__} ({model.count_params():,} parameters) on {replicas} "
            f"replica(s), global batch {global_batch_size} × {seq_len} tokens, "
            + (f"from step {start + 1}" if until_budget else f"steps {start + 1}–{steps}")
            + (f", at most {max_minutes:g} minutes" if max_minutes else "") + ".")
    _reset_metrics(model)
    while step < steps and not stopped:
        loss = float(train_fn(train_iter))
        step += 1
        window_tokens += tokens_per_step
        if not math.isfinite(loss):
            raise FloatingPointError(f"The loss became {loss} at step {step}; lower the learning rate.")
        if budget is not None:
            stopped = agree(time.monotonic() - began > budget)
        epoch_end = step % steps_per_epoch == 0 or step == steps or stopped
        if step % log_every == 0 or epoch_end:
            now = time.monotonic()
            rate = window_tokens / max(now - window_start, 1e-9)
            metrics = _metric_results(model)
            log(f"step {step}{'' if until_budget else f'/{steps}'}  loss {loss:.4f}  perplexity {metrics.get('perplexity', math.nan):.2f}"
                f"  {rate:,.0f} tokens/s")
            if writer:
                with writer.as_default(step=step):
                    tf.summary.scalar("loss", loss)
                    tf.summary.scalar("tokens_per_second", rate)
                    for name, value in metrics.items():
                        tf.summary.scalar(name, value)
            window_start, window_tokens = now, 0
        if epoch_end:
            metrics = _metric_results(model)
            _reset_metrics(model)
            val = evaluate()
            _reset_metrics(model)
            entry = {"epoch": -(-step // steps_per_epoch), "step": step, "loss": loss, **metrics,
                     "val_perplexity": val, "seconds": round(time.monotonic() - began, 1),
                     "best": val < best}
            log(f"epoch {entry['epoch']} (step {step}): validation perplexity {val:.2f}"
                f"{' (best so far)' if val < best else ''}")
            if chief:
                if val < best:
                    model.save_to_preset(os.path.join(out_dir, "best"))
                history.append(entry)
                _write_json(history_path, history)
                with writer.as_default(step=step):
                    tf.summary.scalar("val_perplexity", val)
            best = min(best, val)
            window_start = time.monotonic()  # the next rate leaves validation out
        if step % checkpoint_every == 0 or step == steps or stopped:
            step_var.assign(step)
            save_checkpoint(checkpoint, checkpoint_dir, step, keep_checkpoints, chief)
        if on_step is not None:
            on_step(step, loss)
    if stopped:
        log(f"Stopped after {max_minutes:g} minutes at step {step}.")
    if chief:
        model.save_to_preset(os.path.join(out_dir, "final"))
        writer.flush()
    return model, history


def _step_functions(model, opt, strategy):
    replicas = strategy.num_replicas_in_sync

    def train_replica(x, y, w):
        with tf.GradientTape() as tape:
            hidden = model(x, training=True)
            loss = model.compute_loss(x, y, hidden, w)
            scaled = opt.scale_loss(loss)
        variables = model.trainable_variables
        grads = tape.gradient(scaled, variables)
        if replicas > 1:
            present = [i for i, g in enumerate(grads) if g is not None]
            reduced = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
            grads = list(grads)
            for i, g in zip(present, reduced):
                grads[i] = g
        opt.apply(grads, variables)
        return loss

    @tf.function
    def train_fn(iterator):
        per_replica = strategy.run(train_replica, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def eval_replica(x, y, w):
        nll = model.head.loss(model(x, training=False), y)
        w = tf.cast(w, nll.dtype)
        return tf.reduce_sum(nll * w), tf.reduce_sum(w)

    @tf.function
    def eval_fn(batch):
        total, count = strategy.run(eval_replica, args=batch)
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, total, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, count, axis=None))

    return train_fn, eval_fn


def _agreement(strategy):
    """A function making every worker of a job take the same stop decision (any one's)."""
    if not distribute.is_multi_worker(strategy):
        return bool

    @tf.function
    def any_flag(flag):
        value = strategy.run(lambda: tf.identity(flag))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0

    return lambda flag: bool(any_flag(tf.constant(int(flag))))


def _agree_min_max(strategy, value):
    @tf.function
    def reduce(v):
        per_replica = strategy.run(lambda: tf.reshape(v, [1]))
        return strategy.gather(per_replica, axis=0)  # every replica's value

    values = reduce(tf.constant(value, tf.int64)).numpy()
    return int(values.min()), int(values.max())


def _metric_results(model):
    return {m.name: float(m.result()) for m in model.metrics if m.variables}


def _reset_metrics(model):
    for m in model.metrics:
        m.reset_state()


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
    os.replace(tmp, path)

