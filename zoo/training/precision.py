"""The mixed-precision policy of a run, set only while its model is built."""

import contextlib

import keras
import tensorflow as tf


def mixed_precision_policy(enabled):
    """`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU (no loss scaling needed); the output
    layers compute their log-softmax and the loss in float32 whatever the policy."""
    if not enabled:
        return None
    if enabled in ("mixed_float16", "mixed_bfloat16"):
        return enabled
    return "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"


@contextlib.contextmanager
def dtype_policy(policy):
    """Keras' global dtype policy set to `policy` (if any) inside the block, restored after."""
    previous = keras.config.dtype_policy()
    if policy:
        keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
