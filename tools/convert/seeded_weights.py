"""Random weights that two programs draw alike without sharing a file: each tensor of a fairseq
state dict from its own numpy generator, seeded by the seed and the tensor's index.

The full-size test of the fairseq converter needs gcnn-14's full-size checkpoint (320 million
numbers, 1.3 GB), too large to commit. tools/convert/make_fairseq_goldens.py (with torch and
fairseq's code) fills fairseq's model with these weights and commits only fairseq's outputs and
the state dict's names and shapes; zoo/convert/fairseq_test.py draws the same weights again
without torch and converts them. numpy and the standard library only: the oracle's environment
imports this file by its path.
"""

import numpy as np


def tensor(seed, index, name, shape):
    """The float32 tensor `index` (named `name`, of `shape`) of the state dict drawn from `seed`:
    standard normal, scaled as fairseq's own initialisation would roughly scale it."""
    values = np.random.default_rng([seed, index]).standard_normal(tuple(int(d) for d in shape), dtype=np.float32)
    if name.endswith("weight_g"):  # weight-norm gains: positive, about 1
        return np.abs(values) * np.float32(0.5) + np.float32(0.5)
    if name.endswith("bias"):
        return values * np.float32(0.1)
    if name.endswith("embed_tokens.weight"):
        return values * np.float32(0.1)
    if "adaptive_softmax" in name:  # plain linear layers: 1 / sqrt(fan-in)
        return values / np.float32(np.sqrt(shape[-1]))
    return values  # weight_v: weight normalisation divides by its norm


def state_dict(seed, names, shapes):
    """`{name: tensor}` for the state dict's `names` and `shapes`, in their order."""
    return {name: tensor(seed, i, name, shape) for i, (name, shape) in enumerate(zip(names, shapes))}
