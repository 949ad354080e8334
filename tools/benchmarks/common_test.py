"""The benchmarks' shared inputs: Zipf ids (the harness has its own tests in harness_test.py)."""

import numpy as np
import pytest

from zoo.tools.benchmarks import common


def test_zipf_targets_in_range_and_like_one_over_rank():
    vocabulary, count = 1000, 400_000
    ids = common.zipf_targets(vocabulary, count, seed=0)
    assert ids.shape == (count,)
    assert ids.min() >= 0 and ids.max() < vocabulary
    counts = np.bincount(ids, minlength=vocabulary)
    assert counts.argmax() == 0
    # P(r) ~ 1/(r+1): id 0 is twice as frequent as id 1, ten times as frequent as id 9, ...
    for rank, expected in [(1, 2.0), (3, 4.0), (9, 10.0)]:
        assert counts[0] / counts[rank] == pytest.approx(expected, rel=0.1)
    # ... and the frequencies decrease with the id (compared over blocks, to average out noise).
    blocks = counts[: 500].reshape(10, 50).sum(axis=1)
    assert np.all(np.diff(blocks) < 0)
    # The head probability matches the harmonic numbers: P(id < 10) = H_10 / H_1000.
    harmonic = np.cumsum(1.0 / np.arange(1, vocabulary + 1))
    assert np.mean(ids < 10) == pytest.approx(harmonic[9] / harmonic[-1], rel=0.02)


def test_zipf_targets_are_reproducible():
    a = common.zipf_targets(50_000, 1024, seed=0)
    assert np.array_equal(a, common.zipf_targets(50_000, 1024, seed=0))
    assert not np.array_equal(a, common.zipf_targets(50_000, 1024, seed=1))
