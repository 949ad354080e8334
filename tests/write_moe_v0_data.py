"""Writes the saved-file test data of `SparseMoE` (run once, by the code before the MoE split).

    python tests/write_moe_v0_data.py

- `layers/testdata/sparse_moe_v0/`: two standalone layers (flat, and hierarchical of Appendix B),
  each saved the Keras way twice: a `.keras` model holding only the layer, and the bare layer's
  config (`<name>.json`, `keras.saving.serialize_keras_object`) with its `.weights.h5`; and
  `expected.npz`, the layers' outputs, gates, losses and gradients on fixed inputs.
- `zoo/models/testdata/moe_preset_v0/` (a stack model with a flat and a hierarchical MoE) and
  `zoo/models/testdata/gcnn_moe_preset_v0/` (a GCNN with an MoE after its first block), written
  by `save_to_preset`, with `<dir>.npz` beside each: log-probabilities at inference and the
  training call's hidden states and MoE losses after a fixed seed.

`layers/sparse_moe_v0_test.py` and `zoo/models/moe_preset_v0_test.py` load these files with the
code of the day and compare. The inputs are made by the functions below, which the tests import,
so that what is compared is defined once.
"""

import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYER_DIR = os.path.join(ROOT, "layers", "testdata", "sparse_moe_v0")
PRESET_DIRS = {name: os.path.join(ROOT, "zoo", "models", "testdata", name)
               for name in ("moe_preset_v0", "gcnn_moe_preset_v0")}
DIM = 8
LAYERS = {
    "flat": dict(num_experts=6, k=2, hidden_units=16, importance_weight=0.3, load_weight=0.2),
    "hierarchical": dict(num_experts=8, k=[1, 2], hidden_units=8, output_units=5, groups=2),
}
# The seed set before a layer or model is made in the seeded comparisons: it fixes the seed
# generator of the gating noise (and the dropout of the models).
SEED = 1234


def layer_inputs():
    """x [2, 5, DIM]; the noise of a training call, flat [10, 6] and hierarchical ([10, 2],
    [10, 2, 4]); the weights of the scalar whose gradients are compared."""
    rng = np.random.default_rng(20260101)
    x = rng.normal(size=(2, 5, DIM)).astype("float32")
    noise = {"flat": rng.normal(size=(10, 6)).astype("float32"),
             "hierarchical": (rng.normal(size=(10, 2)).astype("float32"),
                              rng.normal(size=(10, 2, 4)).astype("float32"))}
    weights = {"flat": rng.normal(size=(2, 5, DIM)).astype("float32"),
               "hierarchical": rng.normal(size=(2, 5, 5)).astype("float32")}
    return x, noise, weights


def token_ids():
    return np.random.default_rng(7).integers(0, 50, size=(2, 12))


def layer_results(layer, x, noise, weights):
    """Everything compared for one standalone layer, as a dict of numpy arrays."""
    import tensorflow as tf

    out = {"eval_outputs": layer(x).numpy(), "eval_gates": layer.gates(x).numpy(),
           "train_gates": layer.gates(x, training=True, noise=noise).numpy()}
    routing = layer.route(tf.reshape(x, (-1, DIM)), training=True, noise=noise)
    for key in ("importance", "load", "counts"):
        out[f"train_{key}"] = routing[key].numpy()
    with tf.GradientTape() as tape:
        y = layer(x, training=True, noise=noise)
        scalar = tf.reduce_sum(y * weights) + tf.add_n(layer.losses)
    out["train_outputs"] = y.numpy()
    out["train_losses"] = np.array([v.numpy() for v in layer.losses])
    grads = tape.gradient(scalar, layer.trainable_variables)
    for v, g in zip(layer.trainable_variables, grads):
        out["grad_" + v.path.split("/")[-1]] = tf.convert_to_tensor(g).numpy()
    # the variables' names in their order (written as their paths below the layer, which were
    # the names until the router and experts became layers: the paths now name the part)
    out["variable_paths"] = np.array([v.name for v in layer.weights])
    return out


def seeded_layer_results(make_layer, x):
    """Two training calls with the layer's own noise draws, the layer made right after SEED."""
    import keras

    keras.utils.set_random_seed(SEED)
    layer = make_layer()
    first = layer(x, training=True).numpy()
    losses = np.array([v.numpy() for v in layer.losses])
    second = layer(x, training=True).numpy()
    return {"seeded_outputs_1": first, "seeded_losses_1": losses, "seeded_outputs_2": second}


def preset_results(load):
    """log-probabilities at inference; hidden states and MoE losses of a training call, the model
    loaded right after SEED (`load()` returns it)."""
    import keras

    ids = token_ids()
    keras.utils.set_random_seed(SEED)
    model = load()
    out = {"log_probs": np.asarray(model.log_probs(ids))}
    out["train_hidden"] = model(ids, training=True).numpy()
    out["train_losses"] = np.array([v.numpy() for v in model.losses])
    return out


def _random_weights(layer, seed):
    """Random gate weights (their zero initialisation ties every expert) and biases."""
    rng = np.random.default_rng(seed)
    for v in layer.weights:
        if "gate" in v.path or "noise" in v.path:
            v.assign(rng.normal(size=v.shape))
        elif "bias" in v.path:
            v.assign(0.1 * rng.normal(size=v.shape))


def write_layers():
    import keras

    from zoo.layers import SparseMoE

    os.makedirs(LAYER_DIR, exist_ok=True)
    x, noise, weights = layer_inputs()
    expected = {}
    for i, (name, options) in enumerate(LAYERS.items()):
        keras.utils.set_random_seed(i)
        layer = SparseMoE(name=f"moe_{name}", **options)
        layer.build((None, DIM))
        _random_weights(layer, seed=100 + i)
        inputs = keras.Input((None, DIM))
        keras.Model(inputs, layer(inputs)).save(os.path.join(LAYER_DIR, f"{name}.keras"))
        with open(os.path.join(LAYER_DIR, f"{name}.json"), "w") as f:
            json.dump(keras.saving.serialize_keras_object(layer), f, indent=2)
        keras.saving.save_weights(layer, os.path.join(LAYER_DIR, f"{name}.weights.h5"))
        results = layer_results(layer, x, noise[name], weights[name])
        config = layer.get_config()

        def make_layer():
            again = SparseMoE.from_config(config)
            again.build((None, DIM))
            again.set_weights(layer.get_weights())
            return again

        results.update(seeded_layer_results(make_layer, x))
        expected.update({f"{name}/{key}": value for key, value in results.items()})
    np.savez(os.path.join(LAYER_DIR, "expected.npz"), **expected)


def preset_models():
    """The two preset models (tiny overrides of lstm-moe-ptb and gcnn-moe-ptb), random weights."""
    import zoo

    stack = zoo.load("lstm-moe-ptb", weights="random", vocabulary_size=50, embedding_dim=16, layers=[
        {"type": "lstm", "units": 16},
        {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8},
        {"type": "moe", "num_experts": 8, "k": 2, "hidden_units": 8, "groups": 2},
        {"type": "lstm", "units": 16}])
    gcnn = zoo.load("gcnn-moe-ptb", weights="random", vocabulary_size=50, embedding_dim=8,
                    blocks=[[[3, 16]], [[4, 16]]],
                    moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8})
    return {"moe_preset_v0": stack, "gcnn_moe_preset_v0": gcnn}


def write_presets():
    import keras

    import zoo
    from zoo.layers import SparseMoE

    keras.utils.set_random_seed(0)
    for i, (name, model) in enumerate(preset_models().items()):
        for j, layer in enumerate(l for l in model._flatten_layers() if isinstance(l, SparseMoE)):
            _random_weights(layer, seed=200 + 10 * i + j)
        directory = PRESET_DIRS[name]
        model.save_to_preset(directory)
        results = preset_results(lambda: zoo.load(directory))
        np.savez(directory + ".npz", **results)


if __name__ == "__main__":
    write_layers()
    write_presets()
