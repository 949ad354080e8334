"""The benchmarks' shared helpers: /proc fields, figures not measured, child processes, Zipf inputs
and the peak-memory sampler."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.tools.benchmarks import common


def test_proc_kib_reads_a_field_in_kib_and_names_a_missing_one(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    assert common.proc_kib("VmRSS", str(status)) == 1024
    assert common.proc_kib("VmHWM", str(status)) == 2048
    with pytest.raises(RuntimeError, match="has no VmSwap"):
        common.proc_kib("VmSwap", str(status))


def test_fmt_writes_a_dash_for_a_figure_not_measured():
    assert common.fmt(None, ".1f") == "-" and common.fmt(3.14159, ".2f") == "3.14"


def test_run_child_returns_its_json_and_says_why_a_failure_failed(tmp_path, capsys):
    out = tmp_path / "r.json"
    ok = [sys.executable, "-c", f"import json; json.dump({{'x': 1}}, open({str(out)!r}, 'w'))"]
    result, wall = common.run_child(ok, str(out), "ok")
    assert result == {"x": 1} and wall > 0
    bad = [sys.executable, "-c", "print('before'); raise SystemExit(3)"]
    assert common.run_child(bad, str(tmp_path / "none.json"), "bad") is None
    said = capsys.readouterr().out
    assert "bad: FAILED, exit status 3" in said and "| before" in said


def test_child_json_returns_the_last_lines_json_and_raises_with_the_failures_stderr():
    script = "import json, sys; print('noise'); print(json.dumps({'args': sys.argv[1:]}))"
    assert common.child_json(script, ["a", 2], "the child") == {"args": ["a", "2"]}
    with pytest.raises(RuntimeError, match=r"(?s)^the child failed: .*ZeroDivisionError"):
        common.child_json("1 / 0", [], "the child")


def test_write_results_writes_json_only_when_given_a_path(tmp_path, capsys):
    common.write_results(None, {"a": 1})
    assert capsys.readouterr().out == ""
    common.write_results(str(tmp_path / "o.json"), {"a": 1})
    assert json.loads((tmp_path / "o.json").read_text()) == {"a": 1}


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
