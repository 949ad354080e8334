"""table4 (experiments/table4.py) through `zoo reproduce`, on the quick settings: tiny models and
inputs, a few seconds a run; its figures from made-up timings, the resumption of an interrupted run,
the redraw, and RESULTS.md's rows of its figures."""

import json
import math
import os
import re
import shutil

import pytest

from tests.reproduce_checks import PNG_SIGNATURE, quick_result
from zoo.tools import cli, reproduce
from zoo.tools.reproduce.experiments import table4

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return quick_result("table4", tmp_path_factory.mktemp("reproduce"))


@pytest.mark.ci
def test_quick_run_writes_every_figure_beside_the_papers(quick_run):
    out, result = quick_run
    assert result["experiment"] == "table4" and result["quick"] is True
    assert result["command"] == f"zoo reproduce table4 --quick --out {out}"
    ids = {f["id"] for f in result["figures"]}
    for preset in ("lstm-2048-512", "gcnn-9", "gcnn-8b"):
        for kind in ("throughput-cpu", "throughput-gpu", "responsiveness", "throughput-xla", "responsiveness-xla"):
            assert f"{kind}/{preset}" in ids
    for f in result["figures"]:
        assert math.isfinite(f["ours"]) and f["ours"] > 0, f
    figs = {f["id"]: f for f in result["figures"]}  # their values: the made-up timings' test below
    # tokens/s is the tokens over the median of the timed repeats
    thr = figs["throughput-cpu/gcnn-9"]
    seconds = sorted(result["units"][f"throughput/gcnn-9/plain/{r}"]["seconds"] for r in range(2))
    assert thr["ours"] == pytest.approx(8 * 20 / (sum(seconds) / 2))
    # the XLA forward gives the plain call's log-probabilities
    for preset, info in result["models"].items():
        assert info["xla_max_abs_diff_vs_plain"] < 1e-4, preset


@pytest.mark.ci
def test_quick_run_records_machine_commit_and_profile(quick_run):
    _, result = quick_run
    m = result["machine"]
    assert m["cpu_model"] and m["cores"] >= 1 and re.match(r"2\.\d+", m["tensorflow"]) and m["keras"].startswith("3.")
    if os.path.isdir(os.path.join(ROOT, ".git")):
        assert re.fullmatch(r"[0-9a-f]{40}", result["git"]["commit"])
    assert result["sessions"][0]["started_at"] <= result["sessions"][0]["finished_at"]
    for preset in ("gcnn-9", "gcnn-8b"):
        prof = result["profile"][preset]
        if "error" in prof:
            pytest.skip(f"tf.profiler unavailable here: {prof['error']}")
        parts = prof["by_component"]
        assert {"adaptive softmax", "block_0", "block_1"} <= set(parts)
        assert sum(p["share"] for p in parts.values()) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.ci
def test_quick_run_plot_is_a_png(quick_run):
    out, result = quick_run
    path = os.path.join(out, result["plot"])
    with open(path, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.shape[0] > 400 and image.shape[1] > 800
    assert not os.path.exists(os.path.join(out, "table4.partial.json"))  # removed once complete


@pytest.mark.ci
def test_results_markdown_has_one_row_per_figure(quick_run, tmp_path):
    out, result = quick_run
    md_path = str(tmp_path / "RESULTS.md")
    assert cli.main(["reproduce", "--results", "--out", out, "--results-file", md_path]) == 0
    text = open(md_path).read()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`zoo reproduce" in line]
    assert len(rows) == len(result["figures"])
    assert "Quick smoke-test run" in text
    plot_link = os.path.relpath(os.path.join(out, "table4.png"), str(tmp_path))
    assert f"[table4.png]({plot_link})" in text
    assert "| LSTM-2048 responsiveness (1 sequence of 200 tokens) [tokens/s] | 2,282 (GPU) |" in text
    # by default RESULTS.md goes beside the results folder (the repository root for results/)
    assert cli.main(["reproduce", "--results", "--out", out]) == 0
    assert os.path.isfile(os.path.join(os.path.dirname(out), "RESULTS.md"))


def test_component_of_profiled_ops():
    assert table4.component("gcnn_language_model_1/block_7_1/conv_2_1/Tensordot/MatMul") == "block_7"
    assert table4.component("gcnn_language_model_1/embedding_1/GatherV2") == "embedding"
    assert table4.component("SparseSoftmaxCrossEntropyWithLogits_1/SparseSoftmaxCrossEntropyWithLogits") == \
        "adaptive softmax"


class Interrupt(Exception):
    pass


def test_figures_are_tokens_over_the_median_time_and_ratios_against_the_lstm(monkeypatch):
    """Made-up timings whose figures are known: the LSTM scores 100 tokens in 4 s (25 tokens/s), the
    GCNNs in 1 s and 2 s (100 and 50), so the GCNN / LSTM ratios are 4 and 2; the made-up paper
    figures 10, 30, 5 give paper ratios 3 and 0.5."""
    models = [dict(m, paper={"throughput_cpu": p, "throughput_gpu": p, "responsiveness_gpu": p})
              for m, p in zip(table4.MODELS, (10, 30, 5))]
    monkeypatch.setattr(table4, "MODELS", models)
    settings = dict(table4.settings(quick=True), repeats=3)
    median = dict(zip(settings["models"], (4.0, 1.0, 2.0)))
    units = {}
    for mode in table4.MODES:
        for preset in settings["models"]:
            for variant in settings["variants"]:
                # three repeats around the median; the XLA forward twice as fast as the plain call
                for r, factor in enumerate((0.5, 1.0, 9.0)):
                    seconds = median[preset] * factor / (2 if variant == "xla" else 1)
                    units[f"{mode}/{preset}/{variant}/{r}"] = {"seconds": seconds, "tokens": 100, "device": "cpu"}
    figs = {f["id"]: f for f in table4.figures(settings, units)}
    assert figs["throughput-cpu/lstm-2048-512"]["ours"] == pytest.approx(25.0)
    assert figs["responsiveness/gcnn-9"]["ours"] == pytest.approx(100.0)
    assert figs["throughput-ratio/gcnn-9"]["ours"] == pytest.approx(4.0)
    assert figs["responsiveness-ratio/gcnn-8b"]["ours"] == pytest.approx(2.0)
    assert figs["throughput-ratio/gcnn-9"]["paper"] == pytest.approx(3.0)
    assert figs["responsiveness-ratio/gcnn-8b"]["paper"] == pytest.approx(0.5)
    assert figs["throughput-xla-speedup/gcnn-8b"]["ours"] == pytest.approx(2.0)
    assert "throughput-ratio/lstm-2048-512" not in figs  # the LSTM is the reference, not compared with itself


REAL_RUN = table4.run


def interrupting_after(n, calls):
    """table4.run, stopped (as by Ctrl-C) once `n` units are saved; `calls` records the saved keys."""
    def run(settings, pending, save, log, done=None):
        def counting_save(key, record):
            save(key, record)
            calls.append(key)
            if len(calls) == n:
                raise Interrupt()

        return REAL_RUN(settings, pending, counting_save, log)

    return run


@pytest.mark.ci
def test_an_interrupted_run_resumes_from_its_saved_units(tmp_path, monkeypatch):
    out = str(tmp_path / "results")
    partial_path = os.path.join(out, "table4.partial.json")
    first = []
    monkeypatch.setattr(table4, "run", interrupting_after(7, first))
    with pytest.raises(Interrupt):
        reproduce.reproduce("table4", out=out, quick=True, log=lambda *a: None)
    assert not os.path.exists(os.path.join(out, "table4.json"))
    with open(partial_path) as f:
        partial = json.load(f)
    assert list(partial["units"]) == first and len(first) == 7
    kept = json.dumps({k: partial["units"][k] for k in first}, sort_keys=True)

    # other settings: the partial units are not reused
    shutil.copy(partial_path, str(tmp_path / "saved.json"))
    other = []
    monkeypatch.setattr(table4, "run", interrupting_after(1, other))
    with pytest.raises(Interrupt):
        reproduce.reproduce("table4", out=out, quick=True, repeats=1, log=lambda *a: None)
    with open(partial_path) as f:
        assert list(json.load(f)["units"]) == other and len(other) == 1
    shutil.copy(str(tmp_path / "saved.json"), partial_path)

    # the same settings: only the missing units are measured, the saved ones kept as they were
    second = []
    monkeypatch.setattr(table4, "run", interrupting_after(-1, second))
    result = reproduce.reproduce("table4", out=out, quick=True, log=lambda *a: None)
    wanted = table4.units(table4.settings(quick=True))
    assert sorted(second) == sorted(set(wanted) - set(first))
    assert json.dumps({k: result["units"][k] for k in first}, sort_keys=True) == kept
    assert all(result["units"][k]["session"] == 0 for k in first)
    assert all(result["units"][k]["session"] == 1 for k in second)
    assert len(result["sessions"]) == 2
    assert not os.path.exists(partial_path) and os.path.exists(os.path.join(out, "table4.png"))


@pytest.mark.ci
def test_redraw_derives_the_same_figures_from_the_stored_units(quick_run, tmp_path):
    out, result = quick_run
    copy = str(tmp_path / "results")
    shutil.copytree(out, copy)
    os.remove(os.path.join(copy, "table4.png"))
    stale = json.load(open(os.path.join(copy, "table4.json")))
    stale["description"] = "what the experiment said before a variant was added"
    with open(os.path.join(copy, "table4.json"), "w") as f:
        json.dump(stale, f)
    assert cli.main(["reproduce", "table4", "--redraw", "--out", copy]) == 0
    with open(os.path.join(copy, "table4.json")) as f:
        redrawn = json.load(f)
    assert redrawn["figures"] == result["figures"] and redrawn["units"] == result["units"]
    assert len(redrawn["redrawn"]) == 1 and redrawn["command"] == result["command"]
    assert redrawn["description"] == result["description"]  # the experiment's own, refreshed
    with open(os.path.join(copy, "table4.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
