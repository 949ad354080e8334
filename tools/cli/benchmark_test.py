"""Fast checks of `zoo benchmark` (tools/benchmarks/ through tools/cli/): the registry and its help.
(The shared harness: tools/benchmarks/harness_test.py.)"""

import pytest

from zoo.tools import benchmarks
from zoo.tools.cli import main


def test_every_registered_benchmark_has_a_main():
    for name in benchmarks.names():
        assert callable(benchmarks.entry(name)), name
    assert benchmarks.module("adaptive_softmax") is benchmarks.module("adaptive-softmax")  # the module's name works too
    assert benchmarks.entry("warmup") is benchmarks.module("serving").warmup  # one module, several benchmarks


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
    printed = "".join(capsys.readouterr().out.split())  # argparse may wrap a name at its hyphen
    for name in benchmarks.BENCHMARKS:
        assert f"{name}," in printed or f"{name}(" in printed
