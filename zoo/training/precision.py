"""The mixed-precision policy of a run, set only while its model is built."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras
import tensorflow as tf


def mixed_precision_policy(enabled: bool | str) -> str | None:
    """`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU (no loss scaling needed); the output
    layers compute their log-softmax and the loss in float32 whatever the policy.

    Returns:
        The Keras dtype policy name for `TrainConfig.mixed_precision` (`enabled`): None for
        False, the name itself for a policy name, else the device's mixed policy.

    Example:

    >>> from zoo.training import mixed_precision_policy
    >>> mixed_precision_policy(False) is None, mixed_precision_policy("mixed_bfloat16")
    (True, 'mixed_bfloat16')
    >>> mixed_precision_policy(True) in ("mixed_float16", "mixed_bfloat16")  # float16 on a GPU
    True
    """
    if not enabled:
        return None
    if enabled in ("mixed_float16", "mixed_bfloat16"):
        return enabled
    return "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"


@contextlib.contextmanager
def dtype_policy(policy: str | None) -> Iterator[None]:
    """Keras' global dtype policy set to `policy` (if any) inside the block, restored after."""
    previous = keras.config.dtype_policy()
    if policy:
        keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
