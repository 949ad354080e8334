"""python -m zoo.tools.reproduce.moe_en: the runs it trains differ only where the comparison says
(the preset, the experts), each finished run is skipped and a cut one resumed by the same command,
and a bad variant is refused before anything runs."""

import json
import os

import pytest

from zoo.tools.reproduce import moe_en


def test_every_run_has_the_same_steps_data_order_and_flags_but_the_model():
    dense = moe_en.variant_command("dense", 1, "corpora/en", "runs/dense-s1")
    moe = moe_en.variant_command("moe-16", 1, "corpora/en", "runs/moe-16-s1")
    assert dense[:4] == ["zoo", "train", "--preset", "gcnn-wide-en"] and moe[:4] == ["zoo", "train", "--preset", "gcnn-moe-en"]
    flags = lambda c: [w for w in c[4:] if not w.startswith("runs/")]  # noqa: E731
    assert flags(moe)[:-2] == flags(dense) and moe[-2] == "--set"
    assert json.loads(moe[-1].split("=", 1)[1]) == {"after_blocks": [3], "num_experts": 16, "k": 2, "hidden_units": 512}
    for flag, value in (("--steps", "3000"), ("--seed", "1"), ("--steps-per-epoch", "500")):
        assert dense[dense.index(flag) + 1] == value
    with pytest.raises(ValueError, match="Unknown variant 'moe-x'; expected dense or moe-N"):
        moe_en.variant_command("moe-x", 0, "c", "o")


def test_finished_runs_are_skipped_and_the_others_started_or_resumed(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    (runs / "dense-s0" / "final").mkdir(parents=True)
    (runs / "dense-s0" / "final" / "config.json").write_text("{}")
    (runs / "moe-64-s0" / "checkpoints").mkdir(parents=True)  # cut short: resumed by zoo train
    started = []
    monkeypatch.setattr(moe_en.subprocess, "run", lambda command, **kwargs: started.append(command))
    moe_en.train("corpus", str(runs), ["dense", "moe-64"], [0, 1])
    assert [c[c.index("--out") + 1] for c in started] == [os.path.join(str(runs), n)
                                                          for n in ("moe-64-s0", "dense-s1", "moe-64-s1")]
    with pytest.raises(SystemExit):
        moe_en.main(["train", "--corpus", "c", "--variants", "dense,moe-two"])
