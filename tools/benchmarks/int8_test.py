"""`zoo benchmark int8`: its table from made-up figures, and bad input."""

import pytest

from zoo.tools.benchmarks import int8

MIB = 2 ** 20


def test_the_table_gives_changes_and_ratios_int8_over_float32():
    row = {"preset": "gcnn-ptb", "ppl": [100.0, 100.5], "export": [20 * MIB, 6 * MIB],
           "variables": [16 * MIB, 4 * MIB],
           "served": {"serving_default_1": [0.002, 0.0021], "serving_default_32": [0.010, 0.009],
                      "generate_1": [0.040, 0.030]}}
    line = int8.table([row]).splitlines()[2]
    assert line == ("| `gcnn-ptb` | 100.00 → 100.50 | +0.50% | 20.0 → 6.0 | 30.0% | 25.0% | 2.0 → 2.1 (1.05×) | "
                    "10.0 → 9.0 (0.90×) | 40.0 → 30.0 (0.75×) |")


def test_bad_counts_presets_and_a_missing_corpus_are_one_sentence(tmp_path):
    with pytest.raises(ValueError, match=r"^--calls must be at least 1, got 0\.$"):
        int8.main(["--calls", "0"])
    with pytest.raises(ValueError, match=r"^--presets names no preset"):
        int8.main(["--presets", ","])
    with pytest.raises(ValueError, match=r"^'gcnn-14' has no trained weights to quantize; presets with them: "):
        int8.main(["--presets", "gcnn-14"])
    with pytest.raises(ValueError, match=r"has no test.txt; build it with `python -m zoo.tools.corpora english DIR`"):
        int8.test_lines("gcnn-en", str(tmp_path))


def test_the_kernel_table_gives_microseconds_and_ratios_to_float32():
    rows = int8.kernel_table({"float32 MatMul": 200e-6, "int8 x int8 -> int32 BatchMatMulV3": 600e-6}).splitlines()
    assert rows[2:] == ["| float32 MatMul | 200 | 1.00× |", "| int8 x int8 -> int32 BatchMatMulV3 | 600 | 3.00× |"]


@pytest.mark.parametrize("bad", ["128", "0,10", "a,b", "128,10,3"])
def test_kernels_with_a_bad_shape_is_one_sentence(bad):
    sentence = rf"^--kernels must be two positive sizes D,N \(e.g. 128,10002\), got '{bad}'\.$"
    with pytest.raises(ValueError, match=sentence):
        int8.main(["--kernels", bad])


@pytest.mark.ci
def test_every_kernel_runs_one_row_at_a_time_in_a_fresh_process():
    times = int8.kernels(8, 16, loops=3, repeats=1)
    assert list(times) == ["float32 MatMul", "bfloat16 MatMul (weights cast once)",
                           "int8 x int8 -> int32 BatchMatMulV3", "quint8 QuantizedMatMul (QuantizeV2, Dequantize)"]
    assert all(t > 0 for t in times.values())


def test_paper_size_with_an_unknown_preset_is_one_sentence():
    with pytest.raises(ValueError, match=r"^--paper-size: unknown preset 'gcnn-99'; see `zoo presets`\.$"):
        int8.main(["--paper-size", "gcnn-99"])


@pytest.mark.ci
def test_paper_size_measures_both_exports_of_a_random_weight_model(tmp_path, monkeypatch):
    import json

    seen = []
    monkeypatch.setattr(int8, "served", lambda exports, calls, new_tokens: seen.append(exports) or {
        "serving_default_1": [0.010, 0.012], "generate_1": [0.100, 0.080]})
    int8.main(["--paper-size", "gcnn-ptb", "--calls", "3", "--json", str(tmp_path / "r.json")])
    result = json.load(open(tmp_path / "r.json"))
    assert [e.rsplit("/", 2)[1] for e in seen[0]] == ["gcnn-ptb-float32", "gcnn-ptb-int8"]
    whole, variables = result["bytes"]["whole"], result["bytes"]["variables"]
    assert 0.25 < variables[1] / variables[0] < 0.27  # int8 and a float32 scale per output channel
    assert whole[1] - variables[1] > result["bytes"]["graph"][1] > 0  # the graph, tokenizer and warmup
    rows = result["table"].splitlines()
    assert rows[2].startswith("| whole | ") and rows[-1] == "| `generate_1` p50 | 100.0 ms | 80.0 ms | 0.80× |"


@pytest.mark.ci
def test_served_times_each_request_of_both_exports_in_one_fresh_process(tmp_path):
    from zoo.export import export_saved_model
    from zoo.tools.benchmarks.common import build_model

    export = export_saved_model(build_model("gcnn-ptb", small=True), str(tmp_path), "tiny")
    times = int8.served([export, export], 2, 3)
    assert list(times) == list(int8.REQUESTS) and all(len(pair) == 2 and min(pair) > 0 for pair in times.values())
