"""RESULTS.md from the experiments' records (tools/reproduce/results.py): runs with other budgets
from subfolders, and the benchmark tables after the experiments. (A real run's rows:
experiments/table4_test.py.)"""

import os
import shutil

import pytest

from tests.reproduce_checks import fake_record, run_with_fake_training
from zoo.tools import reproduce
from zoo.tools.reproduce import curves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def test_results_md_gathers_runs_with_other_budgets_from_subfolders(monkeypatch, tmp_path):
    finals = {"glu": 150.0, "relu": 160.0, "gtu": 200.0, "tanh": 210.0}
    run_with_fake_training(monkeypatch, tmp_path, "figure3", finals)
    monkeypatch.setattr(curves, "train_curve", lambda name, key, variant, settings, run_dir, log:
                        fake_record(variant["label"], finals[key] - 10))
    long = reproduce.reproduce("figure3", out=str(tmp_path / "results" / "long"), minutes=7, log=lambda *a: None)
    assert long["command"] == f"zoo reproduce figure3 --out {tmp_path / 'results' / 'long'} --minutes 7"
    assert all(v["minutes"] == 7 for v in long["settings"]["variants"].values())
    path = reproduce.write_results(str(tmp_path / "results"), log=lambda *a: None)
    text = open(path).read()
    assert text.count("## figure3") == 2 and "## figure3 (in results/long/):" in text
    assert "| GLU: validation perplexity after 7 min | — | 140.0 |" in text
    assert "[figure3.png](results/long/figure3.png)" in text and "[figure3.png](results/figure3.png)" in text
    with pytest.raises(ValueError, match="not of table4"):
        reproduce.reproduce("table4", out=str(tmp_path / "t4"), minutes=3, log=lambda *a: None)



def test_results_md_gathers_the_benchmark_tables_after_the_experiments_in_file_name_order(tmp_path):
    out = tmp_path / "results"
    (out / "benchmarks").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "results", "table4.json"), out)
    without = open(reproduce.write_results(str(out), log=lambda *a: None)).read()
    assert "## Benchmarks" not in without  # no table, no section

    (out / "benchmarks" / "b-serving.md").write_text(
        "# Serving\n\n`zoo benchmark serving`\n\n| path | p50 ms |\n| --- | ---: |\n| SavedModel | 1.0 |\n")
    (out / "benchmarks" / "a-moe.md").write_text(
        "## MoE\n\n```\n# a shell comment, not a heading\n```\n\n| experts | s |\n| ---: | ---: |\n| 4 | 2.0 |\n")
    text = open(reproduce.write_results(str(out), log=lambda *a: None)).read()
    assert text.startswith(without)  # the experiments' sections as they were, the tables after them
    section = text[len(without):].lstrip("\n")
    assert section.startswith("## Benchmarks\n")
    # each file's title one level below the section, in file-name order; code and tables as they are
    assert section.index("\n### MoE\n") < section.index("\n### Serving\n")
    assert "\n# a shell comment, not a heading\n" in section
    assert "| SavedModel | 1.0 |" in section and "| 4 | 2.0 |" in section and "`zoo benchmark serving`" in section


def test_the_committed_results_md_is_what_zoo_reproduce_results_writes_from_the_committed_records(tmp_path):
    """RESULTS.md is written, never edited: a record or benchmark table changed without
    `zoo reproduce --results` leaves it stale (it lacked int8.md's paper-size table once)."""
    from zoo.tools.reproduce import results

    committed = os.path.join(ROOT, "RESULTS.md")
    if not os.path.isfile(committed):
        pytest.skip("no RESULTS.md beside an installed package")
    out = tmp_path / "results"
    shutil.copytree(os.path.join(ROOT, "results"), out)
    written = results.write_results(str(out), str(tmp_path / "RESULTS.md"), log=lambda line: None)
    with open(written, encoding="utf-8") as f, open(committed, encoding="utf-8") as g:
        assert f.read() == g.read(), "RESULTS.md is stale: run `zoo reproduce --results`"


def test_the_provenance_line_names_the_instruction_sets_where_recorded():
    from zoo.tools.reproduce.results import _provenance

    record = {"machine": {"cpu_model": "AMD EPYC", "cores": 2, "tensorflow": "2.20.0", "keras": "3.15.1"},
              "sessions": [{"finished_at": "2026-12-07T05:00:00+00:00", "git": {"commit": "0" * 40}}],
              "command": "zoo reproduce x", "plot": "x.png"}
    before = _provenance(record, "x.png")
    assert "on AMD EPYC, 2 cores, TensorFlow 2.20.0" in before  # a record from before: unchanged
    record["machine"]["cpu_isa"] = "avx2"
    assert _provenance(record, "x.png") == before.replace("AMD EPYC,", "AMD EPYC (avx2),")
