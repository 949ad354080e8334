"""The measurement harness: the order of interleaved sides, medians, the report's columns and files,
the child-process protocol, /proc fields and the peak-memory sampler."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.tools.benchmarks import harness

HERE = os.path.dirname(harness.__file__)


def test_rotated_alternates_two_sides_and_rotates_three():
    assert [harness.rotated("AB", r) for r in range(3)] == [["A", "B"], ["B", "A"], ["A", "B"]]
    assert [harness.rotated("ABC", r) for r in range(4)] == [list("ABC"), list("BCA"), list("CAB"), list("ABC")]


def test_interleaved_calls_every_side_once_a_round_in_the_rotated_order():
    calls = []
    answers = harness.interleaved({n: (lambda n=n: calls.append(n) or len(calls)) for n in "ABC"}, 3)
    assert "".join(calls) == "ABCBCACAB"
    assert answers == {"A": [1, 6, 8], "B": [2, 4, 9], "C": [3, 5, 7]}
    calls.clear()
    harness.interleaved({n: (lambda n=n: calls.append(n)) for n in "AB"}, 4, skip=lambda n, r: n == "B" and r % 2)
    assert "".join(calls) == "ABAABA"  # B left out of the odd rounds, where it would have run first


def test_timed_for_calls_back_to_back_until_the_time_has_passed_and_at_least_once(monkeypatch):
    clock = iter(range(100))
    monkeypatch.setattr(harness.time, "perf_counter", lambda: next(clock))
    made = []
    seconds, calls, last = harness.timed_for(3, lambda x: made.append(x) or len(made), "a")
    assert (seconds, calls, last, made) == (3, 3, 3, ["a"] * 3)  # started at 0; 1 and 2 too short, 3 enough
    seconds, calls, last = harness.timed_for(0, lambda: "once")
    assert (seconds, calls, last) == (1, 1, "once")


def test_summary_gives_the_median_and_minimum_and_none_for_no_times():
    assert harness.summary([3.0, 1.0, 2.0, 10.0], warmup_s=[9.0]) == {
        "warmup_s": [9.0], "times_s": [3.0, 1.0, 2.0, 10.0], "median_s": 2.5, "min_s": 1.0}
    assert harness.summary([]) == {"warmup_s": [], "times_s": [], "median_s": None, "min_s": None}


def test_measure_warms_each_side_then_times_the_rounds_and_keeps_the_last_result(monkeypatch):
    clock = iter(range(100))
    monkeypatch.setattr(harness.time, "perf_counter", lambda: next(clock))
    calls = []
    out = harness.measure({n: (lambda n=n: calls.append(n) or len(calls)) for n in "AB"}, repeats=3, warmup=1)
    assert "".join(calls) == "AB" + "AB" + "BA" + "AB"  # the warm-ups, then three rounds
    # every call takes one tick of the fake clock
    assert out["A"] == {"warmup_s": [1], "times_s": [1, 1, 1], "median_s": 1, "min_s": 1, "result": 7}
    assert out["B"]["result"] == 8 and out["B"]["warmup_s"] == [1]


def test_paired_ratio_is_the_median_of_the_rounds_ratios_and_median_rate_of_the_answers():
    assert harness.paired_ratio([2.0, 6.0, 3.0], [1.0, 2.0, 3.0]) == 2.0
    assert harness.paired_ratio([1.0], [0.0]) is None
    answers = [{"tokens": 100, "s": 1.0}, {"tokens": 100, "s": 4.0}, {"tokens": 100, "s": 2.0}]
    assert harness.median_rate(answers) == 50.0
    assert harness.percentile([1, 2, 3, 4, 5], 50) == 3.0 and harness.percentile([0, 10], 99) == pytest.approx(9.9)


def test_self_time_shares_sum_the_ops_by_key_largest_first():
    rows = [{"operation": "moe/MatMul", "type": "MatMul", "total_self_time": 300.0},
            {"operation": "dense/MatMul", "type": "MatMul", "total_self_time": 100.0},
            {"operation": "moe/Relu", "type": "Relu", "total_self_time": 600.0},
            {"operation": "loss", "type": "Sum", "total_self_time": None}]
    assert harness.self_time_shares(rows) == [("Relu", 6e-4, 0.6), ("MatMul", 4e-4, 0.4), ("Sum", 0.0, 0.0)]
    by_scope = harness.self_time_shares(rows, key=lambda r: r["operation"].split("/")[0], top=2)
    assert by_scope == [("moe", 9e-4, 0.9), ("dense", 1e-4, 0.1)]


def test_markdown_table_has_the_columns_and_right_aligns_those_marked():
    table = harness.markdown_table(["model", "median s:", "× base:"], [["`a`", "0.123", "1.00×"]])
    assert table.splitlines() == ["| model | median s | × base |", "| --- | ---: | ---: |", "| `a` | 0.123 | 1.00× |"]
    assert harness.markdown_table(["a", "b", "c"], [["x", "", ""]]).splitlines()[2] == "| x | | |"  # empty cells


def test_text_table_pads_each_column_to_its_width():
    table = harness.text_table([("model", -6), ("s", 5)], [["ab", "1.5"], ["cdefgh", "-"]])
    assert table.splitlines() == ["model      s", "------------", "ab       1.5", "cdefgh     -"]


def test_fmt_writes_a_dash_for_a_figure_not_measured():
    assert harness.fmt(None, ".1f") == "-" and harness.fmt(3.14159, ".2f") == "3.14"


def test_the_shared_flags_and_a_count_below_one_refused():
    p = harness.parser("x", "d", repeats=5, out=True)
    args = p.parse_args(["--out", "t.md", "--json", "r.json"])
    assert (args.repeats, args.out, args.json) == (5, "t.md", "r.json")
    assert harness.parser("x", "d", repeats="").parse_args([]).repeats is None
    assert not hasattr(harness.parser("x", "d").parse_args([]), "repeats")
    assert harness.parser("x", "`zoo benchmark x`: what.\n\nHow it measures: elsewhere.\n").description == \
        "`zoo benchmark x`: what."
    with pytest.raises(ValueError, match="--new-tokens must be at least 1, got 0"):
        harness.at_least_one(argparse.Namespace(repeats=2, new_tokens=0, calls=None), "repeats", "calls",
                             "new_tokens")


def test_report_prints_the_table_and_writes_it_and_the_results(tmp_path, capsys):
    args = harness.parser("x", "d", out=True).parse_args(["--out", str(tmp_path / "t.md"),
                                                         "--json", str(tmp_path / "r.json")])
    assert harness.report(args, {"a": [1, 2]}, "| a |") == {"a": [1, 2]}
    assert (tmp_path / "t.md").read_text() == "| a |\n"
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": [1, 2]}
    said = capsys.readouterr().out
    assert said.startswith("| a |\n") and f"results written to {tmp_path / 'r.json'}" in said
    harness.report(harness.parser("x", "d").parse_args([]), {"a": 1})
    assert capsys.readouterr().out == ""


def test_header_names_the_command_as_a_user_types_it(capsys):
    out = harness.header("moe", ["--experts", "4,8", "--out", "a b.md"], seed=0)
    assert out["command"] == "zoo benchmark moe --experts 4,8 --out 'a b.md'"
    assert (out["benchmark"], out["seed"], out["cpu_count"]) == ("moe", 0, os.cpu_count())
    assert capsys.readouterr().out == f"command: {out['command']}\n"


WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
import harness

class Doubler:
    def double(self, x):
        print("a print goes to stderr")
        return {"twice": 2 * x}

    def fail(self):
        raise ValueError("no")

harness.serve(Doubler(), {"ready": True})
"""


def test_a_worker_answers_each_command_and_names_a_failure():
    with harness.Worker([sys.executable, "-c", WORKER, HERE], "the doubler") as worker:
        assert worker.ready == {"ready": True}
        assert worker("double", x=21) == {"twice": 42}
        with pytest.raises(RuntimeError, match="the doubler: ValueError: no"):
            worker("fail")
        assert worker("double", x=[1]) == {"twice": [1, 1]}
    assert worker.proc.returncode == 0


def test_a_one_shot_child_answers_its_line_and_a_failure_says_why():
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import harness; "
              "harness.answer(lambda: print('noise') or {'n': 3})")
    assert harness.run_once([sys.executable, "-c", script, HERE], "the child") == {"n": 3}
    assert harness.python_child("print(json.dumps([sys.argv[1:], harness.__name__]))", ["a", 2], "c") == \
        [["a", "2"], "harness"]  # json, sys and the harness imported for the script
    with pytest.raises(RuntimeError, match=r"(?s)^the child failed, exit status 1: .*ZeroDivisionError"):
        harness.python_child("1 / 0", [], "the child")


def test_proc_kib_reads_a_field_in_kib_and_names_a_missing_one(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    assert harness.proc_kib("VmRSS", str(status)) == 1024
    assert harness.proc_kib("VmHWM", str(status)) == 2048
    with pytest.raises(RuntimeError, match="has no VmSwap"):
        harness.proc_kib("VmSwap", str(status))


def test_directory_bytes_sums_the_files_below(tmp_path):
    (tmp_path / "a").write_bytes(b"12345")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"123")
    assert harness.directory_bytes(str(tmp_path)) == 8


def test_cpu_flags_names_those_wanted_that_the_cpu_has(monkeypatch):
    monkeypatch.setattr(harness, "cpuinfo", lambda key: {"flags": "fpu avx2 avx512f amx_int8"}.get(key))
    assert harness.cpu_flags(("avx512f", "avx512_vnni", "amx_int8")) == "avx512f, amx_int8"
    assert harness.cpu_flags(("avx512_bf16",)) == "none of avx512_bf16"
    monkeypatch.setattr(harness, "cpuinfo", lambda key: None)
    assert harness.cpu_flags(("avx512f",)) == "unknown"


def test_machine_names_the_cpu_and_cores():
    info = harness.machine()
    assert info["cpu_model"] == harness.cpu_model() and info["cores"] == os.cpu_count()
    assert info["cpu_isa"] == harness.cpu_flags(harness.ISA)
    assert harness.machine_summary().startswith(f"{os.uname().machine} {harness.cpu_model()}, os.cpu_count() = ")


def test_machine_tells_two_cpus_of_one_model_name_apart(monkeypatch):
    zen3 = {"model name": "AMD EPYC", "cpu family": "25", "model": "1", "flags": "fpu avx2"}
    zen4 = {"model name": "AMD EPYC", "cpu family": "25", "model": "17", "flags": "fpu avx2 avx512f avx512_vnni"}
    seen = []
    for cpu in (zen3, zen4):
        monkeypatch.setattr(harness, "cpuinfo", cpu.get)
        seen.append({key: harness.machine()[key] for key in ("cpu_model", "cpu_family_model", "cpu_isa")})
    assert seen == [{"cpu_model": "AMD EPYC", "cpu_family_model": "25/1", "cpu_isa": "avx2"},
                    {"cpu_model": "AMD EPYC", "cpu_family_model": "25/17", "cpu_isa": "avx2, avx512f, avx512_vnni"}]
    monkeypatch.setattr(harness, "cpuinfo", lambda key: None)
    assert harness.machine()["cpu_family_model"] is None and harness.machine()["cpu_isa"] == "unknown"


@pytest.mark.parametrize("name", ["harness", "common"])
def test_harness_and_common_import_neither_the_zoo_nor_tensorflow(name):
    # The PyTorch peers run under a Python without the zoo and import these files as siblings.
    code = (f"import sys; sys.path.insert(0, sys.argv[1]); import {name}; "
            "print(sorted(m for m in ('zoo', 'tensorflow', 'keras') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code, HERE], capture_output=True, text=True, cwd=HERE)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_peak_rss_sees_an_allocation_inside_the_region():
    memory = harness.PeakRSS()
    memory.start()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    peak = memory.stop()
    del block
    assert peak >= 48 * 1024, (peak, memory.method)
