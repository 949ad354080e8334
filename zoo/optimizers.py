"""Optimisers: the GCNN paper's recipe and the presets' own."""

import keras

# §4.2–4.3 of Dauphin et al.: Nesterov momentum 0.99, learning rate in [1, 2], gradients
# clipped to norm 0.1 (a spherical trust region, equation 4: one norm over all parameters).
PAPER_RECIPE = {"name": "nesterov", "learning_rate": 1.0, "momentum": 0.99, "clipnorm": 0.1}


def from_config(config=None):
    """A Keras optimiser from a preset's optimizer spec (a dict with `name`), the paper's by default."""
    config = dict(PAPER_RECIPE if config is None else config)
    name = config.pop("name", "nesterov")
    clipnorm = config.pop("clipnorm", None)
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
    raise ValueError(f"Unknown optimizer {name!r}; expected 'nesterov', 'adam' or 'sgd'.")
