"""The training loop's data order, its sharding over workers and replicas, and mixed precision."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.training import Callback, TrainConfig, TrainingWindows, evaluation_windows, random_states, train
from zoo.training.config import UNBOUNDED
from zoo.data.vocab import WordTokenizer


def _windows(n=23, length=5, batch=4, seed=0):
    inputs = np.arange(n * length, dtype=np.int32).reshape(n, length)
    return TrainingWindows(inputs, inputs + 1, np.ones_like(inputs, np.float32), batch, seed)


def _take(ds, count):
    return [tuple(t.numpy() for t in item) for item in ds.take(count)]


def _context(pipelines=1, pipeline=0, replicas=1):
    return tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline,
                                      num_replicas_in_sync=replicas)


def test_batches_are_a_function_of_the_step_alone():
    windows = _windows()
    assert windows.batches_per_pass == 5  # 23 windows, batches of 4: the last 3 are dropped
    from_start = _take(windows.dataset(0, _context()), 12)
    for start in (1, 5, 7):  # inside the first pass, at a pass boundary, inside the second
        resumed = _take(windows.dataset(start, _context()), 12 - start)
        for a, b in zip(from_start[start:], resumed):
            np.testing.assert_array_equal(a[0], b[0])
    # each pass is a permutation: 20 distinct windows, and the next pass is another order
    first = np.concatenate([b[0][:, 0] for b in from_start[:5]])
    second = np.concatenate([b[0][:, 0] for b in from_start[5:10]])
    assert len(set(first)) == 20 and len(set(second)) == 20 and not np.array_equal(first, second)
    assert not np.array_equal(first, np.concatenate([b[0][:, 0] for b in _take(_windows(seed=1).dataset(0, _context()), 5)]))


@pytest.mark.parametrize("pipelines, replicas", [(1, 2), (2, 2), (2, 4)])
def test_workers_and_replicas_split_each_global_batch_in_order(pipelines, replicas):
    windows = _windows(n=40, batch=8)
    whole = _take(windows.dataset(3, _context()), 4)
    local = replicas // pipelines
    parts = [_take(windows.dataset(3, _context(pipelines, p, replicas)), 4 * local) for p in range(pipelines)]
    for step in range(4):
        rows = np.concatenate([parts[p][step * local + r][0] for p in range(pipelines) for r in range(local)])
        np.testing.assert_array_equal(rows, whole[step][0])
        assert all(parts[p][step * local + r][0].shape[0] == 8 // replicas
                   for p in range(pipelines) for r in range(local))


def test_too_little_data_for_one_global_batch_is_refused():
    with pytest.raises(ValueError, match="has 3 windows, fewer than one global batch of 4"):
        _windows(n=3)


def test_evaluation_windows_are_padded_with_weightless_windows():
    vocab = WordTokenizer.build(["a b c d e f g"] * 3)
    inputs, targets, weights = evaluation_windows(["a b c d e f g"] * 3, vocab, seq_len=4, context=2,
                                                  global_batch_size=4)
    assert len(inputs) % 4 == 0
    real = 3 * 9 - 1  # every next-token prediction of the stream, `<s>` targets excluded below
    assert weights.sum() == real - 2 and np.all(weights[-1] == 0)


@pytest.mark.ci
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_in_half_precision_with_float32_softmax(policy, tmp_path):
    import keras

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 60), ("valid", 10)):
        (corpus / f"{split}.txt").write_text(
            "\n".join(" ".join(rng.choice(list("abcdefgh"), size=6)) for _ in range(n)) + "\n")
    losses, validations = [], []
    hooks = Callback(on_step_end=lambda s, l: losses.append(l),
                     on_validation_end=lambda s, entry: validations.append((s, entry)))
    model, history = train("gcnn-ptb", data=str(corpus), out_dir=str(tmp_path / "run"),
                           config=TrainConfig(steps=20, global_batch_size=8, seq_len=8, mixed_precision=policy,
                                              tokenizer="word"),
                           overrides={"embedding_dim": 8, "blocks": [[[3, 16]]], "dropout": 0.0, "cutoffs": [4]},
                           log=lambda m: None, callbacks=[hooks])
    # a validation at the end of every pass over the data (7 global batches) and at the last step
    assert len(losses) == 20 and validations == [(h["step"], h) for h in history]
    assert [s for s, _ in validations] == [7, 14, 20]
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    assert model.blocks[0].dtype_policy.name == policy
    hidden = model(tf.constant([[4, 5, 6]]))
    assert hidden.dtype == policy.split("_")[1]
    assert model.head.log_prob(hidden).dtype == tf.float32
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    # the saved preset is an ordinary float32 model
    import zoo

    assert zoo.load(str(tmp_path / "run" / "final")).blocks[0].dtype_policy.name == "float32"


@pytest.mark.parametrize("options", [
    {"global_batch_size": 0}, {"seq_len": True}, {"steps": 2.0}, {"keep_checkpoints": -1}, {"max_minutes": 0},
])
def test_train_config_refuses_a_bad_option_naming_it_and_its_value(options):
    (name, value), = options.items()
    with pytest.raises(ValueError) as error:
        TrainConfig(**options)
    message = str(error.value)
    assert message.startswith(f"{name} must be ") and message.endswith(f", got {value!r}.")


def test_train_config_defaults_and_replicas():
    config = TrainConfig(seq_len=16).with_defaults({"global_batch_size": 6, "seq_len": 128})
    assert (config.global_batch_size, config.seq_len) == (6, 16)  # what is set wins over the preset
    assert TrainConfig().with_defaults({}).global_batch_size == 32
    config.check_replicas(3)
    with pytest.raises(ValueError) as error:
        config.check_replicas(4)  # 6 sequences cannot be shared by 4 replicas
    assert "global batch size 6" in str(error.value) and "4 replicas" in str(error.value)
    with pytest.raises(TypeError):  # no alias of global_batch_size
        TrainConfig(batch_size=8)


@pytest.mark.parametrize("options, steps, until_budget", [
    ({}, 10, False),  # one pass over the data
    ({"epochs": 3}, 30, False),
    ({"steps": 7}, 7, False),
    ({"epochs": 2, "max_minutes": 1}, 20, False),  # the budget may end it sooner
    ({"max_minutes": 1}, UNBOUNDED, True),  # only the budget ends it
])
def test_the_schedule_counts_steps_from_steps_epochs_or_the_time_budget(options, steps, until_budget):
    schedule = TrainConfig(**options).schedule(batches_per_pass=10)
    assert (schedule.steps, schedule.until_budget) == (steps, until_budget)
    assert (schedule.steps_per_epoch, schedule.checkpoint_every, schedule.log_every) == (10, 10, 2)


def test_random_states_are_the_seed_generators_and_not_weights():
    from zoo import registry

    model = registry.load("gcnn-moe-ptb", vocabulary_size=30, embedding_dim=8, blocks=[[[3, 16]], [[3, 16]]],
                          dropout=0.1, cutoffs=[10], moe={"after_blocks": [0], "num_experts": 4, "k": 2,
                                                          "hidden_units": 8})
    states = random_states(model)
    weights = {id(w) for w in model.weights}
    assert states and all(id(v) not in weights for v in states)
    assert all(v.path.endswith("seed_generator_state") for v in states)


# ---- weight averaging (an optimizer with use_ema=True) ---------------------------------------

def _tiny_corpus(path):
    path.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 40), ("valid", 8)):
        (path / f"{split}.txt").write_text(
            "\n".join(" ".join(rng.choice(list("abcdefgh"), size=6)) for _ in range(n)) + "\n")
    return str(path)


def _ema_run(corpus, out, steps, ema=None, callbacks=()):
    optimizer = {"name": "adam", "learning_rate": 0.05}
    if ema is not None:
        optimizer.update(use_ema=True, ema_momentum=ema)
    return train("gcnn-ptb", data=corpus, out_dir=out,
                 config=TrainConfig(steps=steps, global_batch_size=4, seq_len=8, steps_per_epoch=3, tokenizer="word"),
                 overrides={"embedding_dim": 8, "blocks": [[[3, 8]]], "dropout": 0.0, "optimizer": optimizer},
                 log=lambda m: None, callbacks=list(callbacks))


@pytest.mark.ci
def test_weight_averaging_validates_and_saves_the_moving_average_and_resumes_exactly(tmp_path):
    import zoo

    corpus = _tiny_corpus(tmp_path / "corpus")
    trajectory, models = [], []
    record = Callback(on_train_begin=lambda trainer: models.append(trainer.model),
                      on_step_end=lambda s, l: trajectory.append([w.copy() for w in models[0].get_weights()]))
    plain, plain_history = _ema_run(corpus, str(tmp_path / "plain"), 7, callbacks=[record])
    assert len(trajectory) == 7
    averaged, history = _ema_run(corpus, str(tmp_path / "ema"), 7, ema=0.6)
    # averaging does not change training: the model ends where the plain run ends
    for a, b in zip(averaged.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # final/ holds Keras's moving average: the first step's weights, then 0.6 · average + 0.4 · weights
    expected = trajectory[0]
    for weights in trajectory[1:]:
        expected = [0.6 * e + 0.4 * w for e, w in zip(expected, weights)]
    final = zoo.load(str(tmp_path / "ema" / "final"))
    for a, b in zip(final.get_weights(), expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # validation scored the averaged weights, not the plain ones
    assert [h["step"] for h in history] == [3, 6, 7]
    assert all(abs(h["val_perplexity"] / p["val_perplexity"] - 1) > 1e-4 for h, p in zip(history, plain_history))
    # stopped after 4 steps and resumed: the average lives in the checkpoint, so the end is the same
    _ema_run(corpus, str(tmp_path / "resumed"), 4, ema=0.6)
    _ema_run(corpus, str(tmp_path / "resumed"), 7, ema=0.6)
    for a, b in zip(zoo.load(str(tmp_path / "resumed" / "final")).get_weights(), final.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# ---- a run directory holds one run --------------------------------------------------------------

def _small_run(corpus, out, steps, log=lambda m: None, **config):
    return train("gcnn-ptb", data=corpus, out_dir=out,
                 config=TrainConfig(steps=steps, global_batch_size=4, seq_len=8, steps_per_epoch=3, tokenizer="word",
                                    checkpoint_every=3, **config),
                 overrides={"embedding_dim": 8, "blocks": [[[3, 8]]], "dropout": 0.0}, log=log)


def _snapshot(directory):
    import hashlib
    import os

    return {os.path.relpath(os.path.join(root, name), directory):
            hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for root, _, names in os.walk(directory) for name in names}


def test_another_runs_directory_is_refused_and_left_as_it_was(tmp_path):
    """Before, a run started into the --out of a run with another corpus found its checkpoints
    "unreadable", started again from step 0 and mixed the two runs' checkpoints, history and best/;
    a third run then resumed the first run's newest checkpoint beside the second's best/."""
    first = _tiny_corpus(tmp_path / "first")
    other = tmp_path / "other"
    other.mkdir()
    rng = np.random.default_rng(2)
    for split, n in (("train", 40), ("valid", 8)):  # other words: another vocabulary
        (other / f"{split}.txt").write_text(
            "\n".join(" ".join(rng.choice(list("pqrstuvwxyz"), size=6)) for _ in range(n)) + "\n")
    out = str(tmp_path / "run")
    _small_run(first, out, 6)
    before = _snapshot(out)
    with pytest.raises(ValueError, match=r"^.*run holds the checkpoints of a run with another tokenizer \(a "
                                         r"WordTokenizer of 12 ids made from other text or with other tokenizer settings\); give a "
                                         r"new --out, or delete .*run to start over\.$"):
        _small_run(str(other), out, 6)
    assert _snapshot(out) == before
    with pytest.raises(ValueError, match=r"holds the checkpoints of a run with another model"):  # other shapes
        train("gcnn-ptb", data=first, out_dir=out,
              config=TrainConfig(steps=6, global_batch_size=4, seq_len=8, steps_per_epoch=3, tokenizer="word"),
              overrides={"embedding_dim": 16, "blocks": [[[3, 8]]], "dropout": 0.0}, log=lambda m: None)
    assert _snapshot(out) == before
    with pytest.raises(ValueError, match=r"holds the checkpoints of a run with another kind of model \(a "
                                         r"GCNNLanguageModel, this run a StackLanguageModel\)"):
        train("lstm-ptb", data=first, out_dir=out,
              config=TrainConfig(steps=6, global_batch_size=4, seq_len=8, steps_per_epoch=3, tokenizer="word"),
              overrides={"embedding_dim": 8}, log=lambda m: None)
    assert _snapshot(out) == before
    lines = []
    _small_run(first, out, 9, log=lines.append)  # the same run goes on
    assert any(line.startswith("Resuming from") and "ckpt-6" in line for line in lines), lines


def test_a_budget_spent_during_a_validation_ends_the_run_there(tmp_path, monkeypatch):
    """Before, the run took one more step after that validation and validated again."""
    from zoo.training import actions, trainer

    validations = []
    real_validate = trainer.Trainer.validate

    def validate(self, step, loss, elapsed):
        validations.append(step)
        return real_validate(self, step, loss, elapsed)

    monkeypatch.setattr(trainer.Trainer, "validate", validate)
    monkeypatch.setattr(actions.TimeBudget, "spent", lambda self: len(validations) >= 1)
    model, history = _small_run(_tiny_corpus(tmp_path / "corpus"), str(tmp_path / "run"), 30, max_minutes=5)
    assert validations == [3] and [h["step"] for h in history] == [3]
    import os

    assert os.path.exists(os.path.join(tmp_path, "run", "checkpoints", "ckpt-3.index"))


def test_the_first_line_says_when_mirrored_found_no_gpu_and_counts_in_words(tmp_path):
    """Before: "on 1 replica(s) … at most 1 minutes", and `--strategy mirrored` on a machine
    without GPUs said nothing of running on the CPU alone."""
    lines = []
    train("gcnn-ptb", data=_tiny_corpus(tmp_path / "c"), out_dir=str(tmp_path / "run"),
          strategy=tf.distribute.MirroredStrategy(["/cpu:0"]),
          config=TrainConfig(steps=1, max_minutes=1, global_batch_size=4, seq_len=8, tokenizer="word"),
          overrides={"embedding_dim": 8, "blocks": [[[3, 8]]], "dropout": 0.0}, log=lines.append)
    (first,) = [line for line in lines if line.startswith("Training ")]
    assert " on 1 replica (no GPU found: mirrored over the CPU alone), global batch 4 × 8 tokens" in first, first
    assert first.endswith("steps 1–1, at most 1 minute."), first


def test_resuming_with_another_global_batch_says_so(tmp_path):
    """From a new user: a run resumed with another --global-batch-size went on silently, its
    epochs counted again from 1."""
    corpus, out = _tiny_corpus(tmp_path / "c"), str(tmp_path / "run")
    _small_run(corpus, out, 3)
    same, other = [], []
    _small_run(corpus, out, 6, log=same.append)
    train("gcnn-ptb", data=corpus, out_dir=out,
          config=TrainConfig(steps=9, global_batch_size=8, seq_len=8, steps_per_epoch=3, tokenizer="word",
                             checkpoint_every=3),
          overrides={"embedding_dim": 8, "blocks": [[[3, 8]]], "dropout": 0.0}, log=other.append)
    assert not [line for line in same if "where the run began with" in line]
    assert "Resuming with a global batch of 8 × 8 tokens where the run began with 4 × 8: from here each step reads " \
           "the new batch's windows, and epochs count its passes." in other
