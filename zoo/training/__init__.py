"""`zoo train`: a preset, a corpus and a strategy in; checkpoints and a trained preset out.

    from zoo.training import TrainConfig, train

    model, history = train("gcnn-ptb", data="ptb", out_dir="runs/gcnn",
                           config=TrainConfig(global_batch_size=64, epochs=10),
                           overrides={"dropout": 0.1})

Its progress lines go to the `zoo.training` loggers at INFO (printed to standard output while the
application has not set up logging, `zoo.logs`), or to any function given as `log=`.

One loop serves every strategy (`zoo.training.distribute`): one device, `MirroredStrategy` on one
machine, `MultiWorkerMirroredStrategy` across machines, where Keras 3's `fit` does not work
(keras-team/keras#20585). It is put together the way Model Garden's `base_trainer` and Orbit put
theirs, from separate pieces on public APIs, each in its own module:

- `config`: `TrainConfig`, every training option, checked in one place;
- `data`: the corpus, and the training windows in an order that is a function of the step alone;
- `checkpoints`: listing, restoring (past unreadable checkpoints) and saving checkpoints, and
  the random generators' states they hold;
- `steps`: the train step and the eval step under a strategy;
- `workers`: the decisions every worker of a job must take together;
- `precision`: the mixed-precision policy;
- `preset`: the one place that asks the preset registry anything;
- `actions`: what the loop does around its steps (the progress line and TensorBoard summaries,
  the time budget), as Orbit's actions;
- `trainer`: the loop (`Trainer`, with `Callback` hooks: validation, the best model and
  checkpoints are its methods) and `train()`, which composes them.

The run directory holds:
- `checkpoints/ckpt-<step>.*`: model weights, optimiser slots, the random generators' states
  (dropout, MoE gating noise) and the step; the newest `keep_checkpoints` are kept;
- `history.json`: one entry per validation ("epoch"), with the step it was taken at;
- `logs/`: TensorBoard summaries; `best/`: the preset of the lowest validation perplexity;
  `final/`: the preset at the last step. Only the chief writes them.
"""

from zoo.training.checkpoints import (CHECKPOINT_DIR, checkpoint_path, checkpoint_steps, random_states,
                                      restore_latest, save_checkpoint, training_checkpoint)
from zoo.training.config import Schedule, TrainConfig
from zoo.training.data import TrainingWindows, evaluation_windows, load_corpus, shard_rows
from zoo.training.precision import mixed_precision_policy
from zoo.training.preset import PresetInfo, load_model, resolve_preset
from zoo.training.steps import StepFunctions, step_functions
from zoo.training.trainer import Callback, Trainer, build_model, train

__all__ = [
    "train", "Trainer", "TrainConfig", "Callback", "Schedule", "build_model",
    "TrainingWindows", "shard_rows", "evaluation_windows", "load_corpus",
    "CHECKPOINT_DIR", "checkpoint_steps", "checkpoint_path", "restore_latest", "save_checkpoint",
    "random_states", "training_checkpoint",
    "step_functions", "StepFunctions", "mixed_precision_policy",
    "resolve_preset", "load_model", "PresetInfo",
]
