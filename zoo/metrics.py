"""Metrics computed the way the papers compute them.

`PerplexityMetric` is the Keras metric that accumulates a perplexity during `fit` (its former
name `Perplexity` still works for one release, and warns); the number `LanguageModel.perplexity`
returns is a `zoo.models.inference.Perplexity`, a float.
"""

import keras
from keras import ops

from zoo.deprecation import former_name


# Registered under its former name, so that what Keras writes of it reads as before.
@keras.saving.register_keras_serializable(package="zoo", name="Perplexity")
class PerplexityMetric(keras.metrics.Metric):
    """`exp(Σ NLL / N)` over every scored token seen since the last reset (§4.1 of the GCNN
    paper). Accumulates the summed negative log-likelihood and the token count, so batches
    with different numbers of real tokens are weighted by tokens, not by batch."""

    def __init__(self, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total", aggregation="sum")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count", aggregation="sum")

    def update_state(self, total_nll, count):
        self.total.assign_add(ops.cast(total_nll, self.dtype))
        self.count.assign_add(ops.cast(count, self.dtype))

    def result(self):
        return ops.exp(self.total / ops.maximum(self.count, 1.0))


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
