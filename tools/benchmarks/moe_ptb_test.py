"""`zoo benchmark moe-ptb` on a fake run (tools/benchmarks/conftest.py): lstm-moe-ptb with its
balancing losses, the same with both losses at 0 (and nothing else changed), and the dense
baseline, all from the same seed; the MoE statistics read from the tracked metrics by suffix."""

import json

import pytest

from zoo.registry import get_preset
from zoo.tools.benchmarks import moe_ptb

WITH, WITHOUT, DENSE = "lstm-moe-ptb, losses 0.1/0.1", "lstm-moe-ptb, losses 0/0", "lstm-wide-ptb (dense)"


def test_three_variants_differ_only_where_they_should(fake_ptb_run, tmp_path):
    stats = {"stack_1_cv_importance": 0.5, "stack_1_cv_load": 0.25, "stack_1_max_load_ratio": 2.0}
    fake_ptb_run.answers = {WITH: (0.2, 110.0, stats), WITHOUT: (0.2, 115.0, {}), DENSE: (0.1, 130.0, {})}
    path = tmp_path / "out.json"
    results = moe_ptb.main(["--steps", "3", "--seed", "2", "--json", str(path)])
    (p1, o1, s1), (p2, o2, s2), (p3, o3, s3) = fake_ptb_run.loaded
    assert (p1, o1, p3, o3) == ("lstm-moe-ptb", {}, "lstm-wide-ptb", {}) and s1 == s2 == s3 == 2
    # the 0/0 variant: the preset's layers with both balancing weights of each MoE layer at 0
    layers = get_preset("lstm-moe-ptb").config["layers"]
    assert p2 == "lstm-moe-ptb" and len(o2["layers"]) == len(layers)
    for mine, theirs in zip(o2["layers"], layers):
        if theirs["type"] == "moe":
            assert mine == {**theirs, "importance_weight": 0.0, "load_weight": 0.0}
        else:
            assert mine == theirs
    assert fake_ptb_run.trained["track"] == ("cv_importance", "cv_load", "max_load_ratio")
    assert fake_ptb_run.trained["steps"] == 3
    assert results[WITH] == {"params": 1000, "median_step_s": 0.2, "cv_importance": 0.5, "cv_load": 0.25,
                             "max_load_ratio": 2.0, "valid_perplexity_stream": 110.0}
    assert results[DENSE]["cv_load"] is None  # no MoE layer: no statistic
    assert json.loads(path.read_text())["results"] == results


def test_a_bad_flag_value_is_refused_before_anything_is_built(fake_ptb_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        moe_ptb.main(["--seed", "0.5"])
    assert exit_info.value.code == 2
    assert "argument --seed: invalid int value: '0.5'" in capsys.readouterr().err
    assert fake_ptb_run.loaded == []
