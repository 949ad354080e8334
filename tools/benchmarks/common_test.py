"""The benchmarks' shared helpers: /proc fields, figures not measured, child processes. (Zipf
inputs and the peak-memory sampler: tests/benchmarks_test.py.)"""

import json
import sys

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


def test_write_results_writes_json_only_when_given_a_path(tmp_path, capsys):
    common.write_results(None, {"a": 1})
    assert capsys.readouterr().out == ""
    common.write_results(str(tmp_path / "o.json"), {"a": 1})
    assert json.loads((tmp_path / "o.json").read_text()) == {"a": 1}
