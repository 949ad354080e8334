"""`zoo benchmark serving`: its helpers (fast) and a tiny end-to-end run (the `ci` tier)."""

import itertools

import numpy as np
import pytest
from zoo.data.vocab import SPECIALS, WordTokenizer


@pytest.fixture(scope="module")
def bench():
    from zoo.tools.benchmarks import serving

    return serving


def test_sentences_are_20_vocabulary_words_and_reproducible(bench):
    vocabulary = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(46)])
    lines = bench.sentences(vocabulary, 64)
    assert len(lines) == 64 and all(len(line.split()) == 20 for line in lines)
    assert all(vocabulary.unk_id not in vocabulary.encode(line) for line in lines)
    assert {w for line in lines for w in line.split()} <= set(vocabulary.tokens[4:])
    assert lines == bench.sentences(vocabulary, 64) and lines != bench.sentences(vocabulary, 64, seed=1)


def test_stress_counts_calls_errors_and_wrong_answers(bench):
    counter, seen = itertools.count(1), []

    def served(texts):
        n = next(counter)  # atomic: every call gets its own number
        seen.append(n)
        if n % 7 == 0:
            raise RuntimeError("boom")
        value = 0.5 if n % 5 == 0 else 0.0
        return {"token_log_probs": np.array([[value, value]]), "perplexity": np.array([1.0])}

    stress = bench.run_stress(served, ["x"], np.array([0.0, 0.0]), threads=3, seconds=0.2)
    assert stress["calls"] == len(seen) > 0
    assert stress["errors"] == sum(1 for n in seen if n % 7 == 0) and stress["first_error"] == "RuntimeError: boom"
    assert stress["wrong_answers"] == sum(1 for n in seen if n % 5 == 0 and n % 7)


@pytest.mark.ci
def test_a_tiny_run_prints_the_table_with_ratios_and_no_errors(bench, capsys):
    out = bench.main(["--small", "--presets", "gcnn-ptb", "--seconds", "1", "--latency-calls", "20",
                         "--batch-calls", "5", "--threads", "4", "--generate-calls", "5", "--new-tokens", "6"])
    printed = capsys.readouterr().out
    assert "SavedModel serving_default" in printed and "ratio SavedModel / in-process" in printed
    (result,) = out["results"]
    assert result["stress"]["errors"] == 0 and result["stress"]["wrong_answers"] == 0
    assert result["stress"]["calls"] > 0 and set(result["ratios"]) == {"latency_p50", "latency_p99", "batch"}
    assert "SavedModel generate (6 new tokens)" in printed and set(result["ratios_generate"]) == {"p50", "p99"}
    assert result["generate_saved"]["calls"] == result["generate_local"]["calls"] == 5
