"""`fit` under MirroredStrategy (two logical CPU devices) equals `fit` on one device.

Logical devices must be configured before TensorFlow starts, so the comparison runs in a
fresh Python process.
"""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import zoo

    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, size=(8, 12)).astype("int32")
    y = np.roll(x, -1, axis=1)
    w = np.ones_like(y, dtype="float32")
    w[:, -3:] = 0.0  # uneven weights: the loss must be the mean over real tokens of the global batch

    def train(strategy):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            model = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8,
                                          blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]],
                                          cutoffs=[10, 30], dropout=0.0)
            model.compile(optimizer=keras.optimizers.SGD(0.5))
        ds = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8).repeat(3)
        history = model.fit(ds, epochs=1, verbose=0, shuffle=False)
        return history.history["loss"], [v.numpy().tolist() for v in model.weights]

    one = train(tf.distribute.OneDeviceStrategy("/cpu:0"))
    two = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    json.dump({"one": one, "two": two}, sys.stdout)
    """
)


def test_mirrored_fit_with_adaptive_softmax_matches_one_device():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().split("\n")[-1])
    (loss_one, weights_one), (loss_two, weights_two) = result["one"], result["two"]
    assert abs(loss_one[0] - loss_two[0]) <= 1e-5 * abs(loss_one[0])
    import numpy as np

    for a, b in zip(weights_one, weights_two):
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-6)
    # and training moved the weights, so the comparison is not vacuous
    assert loss_one[0] > 0
