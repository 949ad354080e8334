"""Fast checks of `zoo benchmark` (tools/benchmarks/): the registry, the Zipf target sampler, and
the shared helpers that the PyTorch peer imports without the zoo."""

import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.tools import benchmarks
from zoo.tools.benchmarks import common
from zoo.tools.cli import main


def test_every_registered_benchmark_has_a_main():
    for name in benchmarks.names():
        assert callable(benchmarks.module(name).main), name
    assert benchmarks.module("input_pipeline") is benchmarks.module("input")  # the module's name works too


def test_unknown_benchmark_names_the_known_ones(capsys):
    with pytest.raises(ValueError, match="no-such-benchmark") as info:
        benchmarks.run("no-such-benchmark", [])
    for name in benchmarks.BENCHMARKS:
        assert name in str(info.value)
    assert main(["benchmark", "no-such-benchmark"]) == 2
    assert "adaptive-softmax" in capsys.readouterr().err


def test_benchmark_help_lists_every_benchmark(capsys):
    with pytest.raises(SystemExit):
        main(["benchmark", "--help"])
    printed = " ".join(capsys.readouterr().out.split())
    for name in benchmarks.BENCHMARKS:
        assert name in printed


def test_common_imports_neither_the_zoo_nor_tensorflow():
    # The PyTorch peer runs under a Python without the zoo and imports common.py as its sibling.
    folder = os.path.dirname(common.__file__)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import common; "
            "print(sorted(m for m in ('zoo', 'tensorflow', 'keras') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True, cwd=folder)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_peak_rss_sees_an_allocation_inside_the_region():
    memory = common.PeakRSS()
    memory.start()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    peak = memory.stop()
    del block
    assert peak >= 48 * 1024, (peak, memory.method)


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
