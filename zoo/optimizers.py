"""Optimisers: the GCNN paper's recipe and the presets' own, from an optimizer spec.

An optimizer spec is a dict: `name` ("nesterov", the GCNN paper's; "adam"; "sgd";
"factorized_adam", Appendix D of Shazeer et al.), `learning_rate`, `global_clipnorm` (the norm the
gradients of all parameters together are clipped to, Keras' `global_clipnorm`), a learning-rate
schedule (`warmup_steps`, or `decay_steps` with `final_fraction`), and any other argument of the
Keras optimiser it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from zoo.factorized_adam import FactorizedAdam

# §4.2–4.3 of Dauphin et al.: Nesterov momentum 0.99, learning rate in [1, 2], gradients
# clipped to norm 0.1 (a spherical trust region, equation 4: one norm over all parameters).
PAPER_RECIPE = {"name": "nesterov", "learning_rate": 1.0, "momentum": 0.99, "global_clipnorm": 0.1}
# Specs saved before the key was named for what it does: "clipnorm" there is the same global clip.
FORMER_CLIP_KEY = "clipnorm"
OPTIMIZERS = {
    "nesterov": lambda **config: keras.optimizers.SGD(
        learning_rate=config.pop("learning_rate", 1.0), momentum=config.pop("momentum", 0.99), nesterov=True,
        **config),
    "adam": keras.optimizers.Adam,
    "sgd": keras.optimizers.SGD,
    "factorized_adam": FactorizedAdam,
}


@keras.saving.register_keras_serializable(package="zoo")
class WarmupRsqrtDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Shazeer et al. (2017), Appendix C.1: the learning rate rises linearly over the first
    `warmup_steps` steps, then decays as the inverse square root of the step number."""

    def __init__(self, learning_rate: float, warmup_steps: int):
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps

    def __call__(self, step: int | tf.Tensor) -> tf.Tensor:
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.learning_rate * keras.ops.minimum(step / warmup, keras.ops.sqrt(warmup / step))

    def get_config(self) -> dict[str, Any]:
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps}


def without_clipping(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` with its gradient clipping removed (under either key)."""
    return {key: value for key, value in spec.items() if key not in ("global_clipnorm", FORMER_CLIP_KEY)}


def learning_rate_at(optimizer: keras.optimizers.Optimizer, step: int) -> float:
    """The learning rate `optimizer` applies at `step`: Keras's public `learning_rate` reads the
    schedule at the optimizer's iteration count, which this sets to `step`."""
    optimizer.iterations.assign(step)
    return float(optimizer.learning_rate)


def _pop_learning_rate(config: dict[str, Any]) -> float | keras.optimizers.schedules.LearningRateSchedule | None:
    warmup = config.pop("warmup_steps", None)
    decay = config.pop("decay_steps", None)
    final_fraction = config.pop("final_fraction", 0.02)
    rate = config.pop("learning_rate", None)
    if warmup and decay:
        raise ValueError(f"An optimizer takes warmup_steps ({warmup}) or decay_steps ({decay}), not both.")
    if warmup:
        return WarmupRsqrtDecay(1e-3 if rate is None else rate, warmup)
    if decay is not None:
        if isinstance(decay, bool) or not isinstance(decay, int) or decay < 1:
            raise ValueError(f"decay_steps must be a whole number of steps >= 1, got {decay!r}.")
        if isinstance(final_fraction, bool) or not isinstance(final_fraction, (int, float)) or not 0 <= final_fraction <= 1:
            raise ValueError(f"final_fraction must be a number from 0 to 1, got {final_fraction!r}.")
        return keras.optimizers.schedules.CosineDecay(1e-3 if rate is None else rate, decay, alpha=final_fraction)
    return rate


def from_config(config: Mapping[str, Any] | None = None) -> keras.optimizers.Optimizer:
    """A Keras optimiser from a preset's optimizer spec (see the module docstring), the paper's
    recipe by default."""
    config = dict(PAPER_RECIPE if config is None else config)
    name = config.pop("name", "nesterov")
    if name not in OPTIMIZERS:
        raise ValueError(
            f"Unknown optimizer {name!r}; expected 'nesterov', 'adam', 'sgd' or 'factorized_adam'."
        )
    if FORMER_CLIP_KEY in config:
        if "global_clipnorm" in config:
            raise ValueError(f"An optimizer spec clips with global_clipnorm; got both it and {FORMER_CLIP_KEY!r}, "
                             "its former name.")
        config["global_clipnorm"] = config.pop(FORMER_CLIP_KEY)
    rate = _pop_learning_rate(config)
    if rate is not None:
        config["learning_rate"] = rate
    config.setdefault("global_clipnorm", None)
    return OPTIMIZERS[name](**config)
