"""`zoo benchmark ptb-softmax` on a fake run (tools/benchmarks/conftest.py): the full and the
adaptive gcnn-ptb from the same seed on the same batches, `--cutoffs` parsed into the adaptive
one, and the speed-up and perplexity gap computed from the step times and perplexities."""

import json

import pytest

from zoo.tools.benchmarks import ptb_softmax


def test_cutoffs_reach_the_adaptive_model_and_the_ratios_are_exact(fake_ptb_run, tmp_path, capsys):
    fake_ptb_run.answers = {"full": (0.3, 120.0, {}), "adaptive": (0.1, 126.0, {})}
    path = tmp_path / "out.json"
    results = ptb_softmax.main(["--steps", "7", "--cutoffs", "100,300", "--seed", "5", "--batch-size", "4",
                                "--seq-len", "9", "--json", str(path)])
    assert fake_ptb_run.loaded == [("gcnn-ptb", {}, 5), ("gcnn-ptb", {"cutoffs": [100, 300]}, 5)]
    assert fake_ptb_run.trained["models"] == ["full", "adaptive"] and fake_ptb_run.trained["steps"] == 7
    assert fake_ptb_run.trained["batches"] == ("batches", ("train",), "ptb vocabulary", 4, 9,
                                               (("repeat", True), ("seed", 5), ("shuffle", True)))
    written = json.loads(path.read_text())
    assert written["cutoffs"] == [100, 300]
    assert written["speedup"] == pytest.approx(3.0) and written["perplexity_gap"] == pytest.approx(0.05)
    assert results["adaptive"] == {"median_step_s": 0.1, "valid_perplexity_stream": 126.0, "params": 1001}
    assert "step time full/adaptive: 3.00x; adaptive perplexity vs full: +5.0%" in capsys.readouterr().out


def test_a_bad_flag_value_is_refused_before_anything_is_built(fake_ptb_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ptb_softmax.main(["--steps", "many"])
    assert exit_info.value.code == 2
    assert "argument --steps: invalid int value: 'many'" in capsys.readouterr().err
    assert fake_ptb_run.loaded == []
