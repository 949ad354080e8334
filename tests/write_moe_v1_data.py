"""Writes the saved-file test data of `SparseMoE` as it was before its router and experts became
Keras layers of their own (run once, by the code before that change).

    python tests/write_moe_v1_data.py

`zoo/models/testdata/moe_v1/` holds, for the two tiny models of `write_moe_v0_data.preset_models`
(a stack with a flat and a hierarchical mixture, and a GCNN with a flat one), each trained two
steps with FactorizedAdam (the experts' matrices factored):

- `<name>.ckpt*`: the training checkpoint `zoo train` writes (`training_checkpoint`: the model,
  the optimiser's slots, the step and the random generators' states);
- `<name>.weights.h5`: Keras' `save_weights` of the trained model;
- `<name>_int8/`: the trained model quantized to int8 (the experts' kernels with a scale per
  expert and output channel), saved by `save_to_preset`;
- `<name>.npz`: what the test compares (`checkpoint_results`): log-probabilities, every optimiser
  variable, the random states, and the loss and log-probabilities after one more training step
  from the restored state; and the int8 model's log-probabilities.

`zoo/models/moe_v1_test.py` loads these with the code of the day and compares.
"""

import os

import numpy as np

from tests.write_moe_v0_data import preset_models, token_ids

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "zoo", "models", "testdata",
                        "moe_v1")
NAMES = ("moe_preset_v0", "gcnn_moe_preset_v0")  # the models of write_moe_v0_data.preset_models
SEED = 4321


def compiled(model):
    from zoo.factorized_adam import FactorizedAdam

    model.compile(optimizer=FactorizedAdam(learning_rate=0.01))
    model.optimizer.build(model.trainable_variables)
    return model


def train_step(model):
    ids = token_ids()
    return float(model.train_on_batch(ids[:, :-1], ids[:, 1:])[0])


def checkpoint_results(model, step):
    """What is compared, as numpy arrays; ends with one more training step (which draws noise
    and dropout from the random states)."""
    from zoo.training.checkpoints import random_states

    out = {"log_probs": np.asarray(model.log_probs(token_ids())), "step": np.asarray(step)}
    for i, v in enumerate(model.optimizer.variables):
        out[f"optimizer_{i}"] = np.asarray(v)
    for i, v in enumerate(random_states(model)):
        out[f"random_{i}"] = np.asarray(v)
    out["next_loss"] = np.asarray(train_step(model))
    out["next_log_probs"] = np.asarray(model.log_probs(token_ids()))
    return out


def write():
    import keras
    import tensorflow as tf

    from zoo.training.checkpoints import training_checkpoint

    os.makedirs(DATA_DIR, exist_ok=True)
    keras.utils.set_random_seed(SEED)
    for name, model in preset_models().items():
        for v in model.weights:  # random gates: their zero start ties every expert
            if "gate_kernel" in v.path or "noise_kernel" in v.path:
                v.assign(np.random.default_rng(len(v.path)).normal(size=v.shape))
        compiled(model)
        train_step(model)
        train_step(model)
        step = tf.Variable(2, dtype=tf.int64)
        training_checkpoint(model, model.optimizer, step).write(os.path.join(DATA_DIR, f"{name}.ckpt"))
        model.save_weights(os.path.join(DATA_DIR, f"{name}.weights.h5"))
        weights = model.get_weights()
        results = checkpoint_results(model, 2)
        model.set_weights(weights)
        model.quantize("int8")
        model.save_to_preset(os.path.join(DATA_DIR, f"{name}_int8"))
        results["int8_log_probs"] = np.asarray(model.log_probs(token_ids()))
        np.savez(os.path.join(DATA_DIR, f"{name}.npz"), **results)


if __name__ == "__main__":
    write()
