"""Optimisers: the GCNN paper's recipe and the presets' own."""

import keras

# §4.2–4.3 of Dauphin et al.: Nesterov momentum 0.99, learning rate in [1, 2], gradients
# clipped to norm 0.1 (a spherical trust region, equation 4: one norm over all parameters).
PAPER_RECIPE = {"name": "nesterov", "learning_rate": 1.0, "momentum": 0.99, "clipnorm": 0.1}


@keras.saving.register_keras_serializable(package="zoo")
class WarmupRsqrtDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Shazeer et al. (2017), Appendix C.1: the learning rate rises linearly over the first
    `warmup_steps` steps, then decays as the inverse square root of the step number."""

    def __init__(self, learning_rate, warmup_steps):
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.learning_rate * keras.ops.minimum(step / warmup, keras.ops.sqrt(warmup / step))

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps}


def from_config(config=None):
    """A Keras optimiser from a preset's optimizer spec (a dict with `name`), the paper's by default.

    Names: "nesterov" (the GCNN paper's), "adam", "sgd", "factorized_adam" (Appendix D of
    Shazeer et al.); `clipnorm` clips the global gradient norm; `warmup_steps` puts the learning
    rate on `WarmupRsqrtDecay`; `decay_steps` on a cosine from `learning_rate` down to
    `final_fraction` (default 0.02) of it over that many steps, held there afterwards."""
    config = dict(PAPER_RECIPE if config is None else config)
    name = config.pop("name", "nesterov")
    clipnorm = config.pop("clipnorm", None)
    warmup = config.pop("warmup_steps", None)
    decay = config.pop("decay_steps", None)
    final_fraction = config.pop("final_fraction", 0.02)
    if warmup and decay:
        raise ValueError(f"An optimizer takes warmup_steps ({warmup}) or decay_steps ({decay}), not both.")
    if warmup:
        config["learning_rate"] = WarmupRsqrtDecay(config.get("learning_rate", 1e-3), warmup)
    if decay is not None:
        if isinstance(decay, bool) or not isinstance(decay, int) or decay < 1:
            raise ValueError(f"decay_steps must be a whole number of steps >= 1, got {decay!r}.")
        if isinstance(final_fraction, bool) or not isinstance(final_fraction, (int, float)) or not 0 <= final_fraction <= 1:
            raise ValueError(f"final_fraction must be a number from 0 to 1, got {final_fraction!r}.")
        config["learning_rate"] = keras.optimizers.schedules.CosineDecay(
            config.get("learning_rate", 1e-3), decay, alpha=final_fraction)
    if name == "nesterov":
        return keras.optimizers.SGD(
            learning_rate=config.pop("learning_rate", 1.0),
            momentum=config.pop("momentum", 0.99),
            nesterov=True,
            global_clipnorm=clipnorm,
            **config,
        )
    if name == "adam":
        return keras.optimizers.Adam(global_clipnorm=clipnorm, **config)
    if name == "sgd":
        return keras.optimizers.SGD(global_clipnorm=clipnorm, **config)
    if name == "factorized_adam":
        from zoo.factorized_adam import FactorizedAdam

        return FactorizedAdam(global_clipnorm=clipnorm, **config)
    raise ValueError(
        f"Unknown optimizer {name!r}; expected 'nesterov', 'adam', 'sgd' or 'factorized_adam'."
    )
