"""`zoo benchmark adaptive-softmax` without running it: its flags and their refusals, the ratio of
medians, and one vocabulary measured with the child processes replaced by made-up results (one
child per model under process isolation, one for both under vocabulary isolation)."""

import json
import os

import numpy as np
import pytest

from zoo.tools.benchmarks import adaptive_softmax as bench


def test_flags_default_to_both_vocabularies_process_isolation_and_every_cpu(monkeypatch):
    monkeypatch.delenv("ZOO_TORCH_PYTHON", raising=False)
    args = bench.parse([])
    assert (args.vocab, args.small, args.repeats, args.isolation, args.torch_python) == \
        ("both", False, None, "process", None)
    assert args.threads == os.cpu_count()
    assert bench.parse(["--vocab", "1bw", "--repeats", "2", "--threads", "3"]).repeats == 2


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
    (["--torch-python", "/no/such/python"], "'/no/such/python' is not an executable file"),
])
def test_a_bad_value_is_refused_in_one_sentence(argv, message):
    with pytest.raises(ValueError) as info:
        bench.parse(argv)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_vocabulary_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        bench.parse(["--vocab", "ptb"])
    assert "invalid choice: 'ptb'" in capsys.readouterr().err


def test_the_ratio_of_medians_is_none_when_either_is_missing():
    assert bench._ratio({"median_s": 3.0}, {"median_s": 1.5}) == 2.0
    assert bench._ratio(None, {"median_s": 1.5}) is None
    assert bench._ratio({"median_s": 3.0}, {"median_s": None}) is None


@pytest.mark.parametrize("isolation, children", [("process", [["adaptive"], ["full"]]),
                                                 ("vocabulary", [["adaptive", "full"]])])
def test_one_vocabulary_measured_from_made_up_children(isolation, children, monkeypatch, tmp_path, capsys):
    calls = []
    medians = {"adaptive": 0.5, "full": 2.0}

    def child(vocab, models, args, hidden_file, targets_file):
        calls.append(models)
        assert np.load(hidden_file).shape == (bench.TOKENS, bench.HIDDEN)
        assert np.load(targets_file).max() < 20_000
        return {m: {"median_s": medians[m]} for m in models}

    monkeypatch.setattr(bench, "_child", child)
    args = bench.parse(["--small", "--isolation", isolation])
    measured = bench._measure(str(tmp_path), "small", args)
    assert calls == children
    assert measured["full_over_adaptive"] == 4.0 and measured["ours_over_torch"] is None  # no torch
    assert (measured["vocabulary_size"], measured["cutoffs"]) == (20_000, [2_000, 10_000])
    targets = np.load(tmp_path / "small-targets.npy")
    assert measured["targets_in_head"] == float(np.mean(targets < 2_000)) and 0 < measured["targets_in_head"] < 1
    assert "running small (smoke test): vocabulary 20,000, cutoffs 2000/10000" in capsys.readouterr().out


def test_the_table_says_failed_for_a_model_without_a_result(capsys):
    row = {"params": 1234, "median_s": 0.5, "min_s": 0.4, "times_s": [0.4, 0.5, 0.6], "setup_rss_mib": 10.0,
           "step_peak_mib": 2.0, "process_peak_mib": 300.0}
    report = {"vocabularies": {"small": {"label": "small", "vocabulary_size": 20_000,
                                         "results": {"adaptive": row, "full": None},
                                         "full_over_adaptive": None}}}
    bench._print_table(report)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:5] == ["small", "ours", "AdaptiveSoftmax", "1,234", "0.5000"]
    assert lines[3].split()[1:] == ["ours", "FullSoftmax", "FAILED", "(see", "above)"]
    assert lines[4].split() == ["ratio", "of", "medians:", "full/adaptive", "-x"]


@pytest.mark.ci  # a child process with TensorFlow, through the harness's protocol
def test_a_small_run_measures_both_models_in_one_child(tmp_path):
    import math

    from zoo.layers.adaptive_softmax import AdaptiveSoftmax
    from zoo.layers.softmax import FullSoftmax

    report = bench.main(["--small", "--isolation", "vocabulary", "--repeats", "2", "--threads", "1",
                         "--json", str(tmp_path / "r.json")])
    results = report["vocabularies"]["small"]["results"]
    for name, layer in (("adaptive", AdaptiveSoftmax(20_000, [2_000, 10_000], factor=bench.FACTOR)),
                        ("full", FullSoftmax(20_000))):
        layer.build((None, bench.HIDDEN))
        r = results[name]
        assert r["params"] == layer.count_params()  # the child built the same layer
        assert len(r["warmup_s"]) == 1 and len(r["times_s"]) == 2
        assert r["median_s"] == pytest.approx(sum(r["times_s"]) / 2) and r["min_s"] == min(r["times_s"])
    # at initialisation every id is about equally likely: the mean NLL is about log V
    assert abs(results["full"]["loss"] - math.log(20_000)) < 0.1
    ratio = results["full"]["median_s"] / results["adaptive"]["median_s"]
    assert report["vocabularies"]["small"]["full_over_adaptive"] == ratio
    assert json.loads((tmp_path / "r.json").read_text())["vocabularies"]["small"]["results"]["full"]["params"] == \
        results["full"]["params"]
