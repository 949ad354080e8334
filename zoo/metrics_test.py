"""The perplexity metric of `fit`: exp of the summed negative log-likelihood over every token seen."""

import math

import pytest

from zoo.metrics import PerplexityMetric


def test_batches_are_weighted_by_their_tokens_not_averaged():
    metric = PerplexityMetric()
    metric.update_state(2.0, 1)  # one token of NLL 2
    metric.update_state(3.0, 3)  # three tokens of NLL 1
    assert float(metric.result()) == pytest.approx(math.exp(5.0 / 4))  # not exp((2 + 1) / 2)
    metric.reset_state()
    assert float(metric.result()) == 1.0  # nothing seen: exp(0), not a division by zero
    assert metric.name == "perplexity"


def test_the_former_name_warns_and_is_the_same_class():
    import zoo.metrics

    with pytest.warns(DeprecationWarning, match="zoo.metrics.PerplexityMetric"):
        assert zoo.metrics.Perplexity is PerplexityMetric
