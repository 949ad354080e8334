"""`zoo reproduce finetune-rate` (tools/reproduce/experiments/finetune_rate.py): its --quick run
fine-tunes the extended gcnn-en at each learning-rate scale, and the committed record chose the
fine-tuning optimizer that gcnn-en ships with."""

import json
import os

import pytest

import zoo
from tests.reproduce_checks import PNG_SIGNATURE, quick_result
from zoo.tools.reproduce.experiments import finetune, finetune_rate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.ci
def test_quick_run_fine_tunes_at_each_scale_and_chooses_the_lowest_at_the_last_budget(tmp_path):
    out, result = quick_result("finetune-rate", tmp_path)
    units = result["units"]
    assert list(units) == ["ptb/extended@1", "ptb/extended@0.5"]
    rates = [units[k]["optimizer"]["learning_rate"] for k in units]
    assert rates == pytest.approx([2e-3, 1e-3])
    # both start from the same extended model on the same lines, then part
    assert units["ptb/extended@1"]["curve"][0] == units["ptb/extended@0.5"]["curve"][0]
    last = {k: finetune.at(u, 0.05)["val_perplexity"] for k, u in units.items()}
    figures = {f["id"]: f["ours"] for f in result["figures"]}
    assert figures["ptb/chosen-scale"] == (1.0 if last["ptb/extended@1"] <= last["ptb/extended@0.5"] else 0.5)
    assert figures["ptb/lr-x0.5@0.05min"] == last["ptb/extended@0.5"]
    with open(os.path.join(out, "finetune-rate.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE


def test_gcnn_en_fine_tunes_with_the_rate_the_committed_record_chose():
    with open(os.path.join(ROOT, "results", "finetune-rate.json")) as f:
        record = json.load(f)
    assert record["settings"]["domain"] == "ptb" and "ptb" not in finetune.DOMAINS  # not a held-out domain
    scale = finetune_rate.chosen(record["settings"], record["units"])
    assert {f["id"]: f["ours"] for f in record["figures"]}["ptb/chosen-scale"] == scale
    assert zoo.registry.fine_tune_optimizer("gcnn-en") == finetune_rate.optimizer("gcnn-en", scale)
    # the finetune record's fine-tuned arms ran with it
    with open(os.path.join(ROOT, "results", "finetune.json")) as f:
        transfer = json.load(f)
    assert transfer["settings"]["fine_tune_optimizer"] == finetune_rate.optimizer("gcnn-en", scale)
    for key, unit in transfer["units"].items():
        if unit["arm"] in ("pretrained", "extended"):
            assert unit["optimizer"] == finetune_rate.optimizer("gcnn-en", scale), key
        elif unit["arm"] == "scratch":
            assert unit["optimizer"] == finetune_rate.optimizer("gcnn-en", 1.0), key


def test_finetune_rate_is_listed_and_refuses_repeats():
    from zoo.tools import reproduce

    assert "finetune-rate" in dict((n, d) for n, d, _ in reproduce.list_experiments())
    with pytest.raises(ValueError, match="--repeats does not apply"):
        finetune_rate.settings(repeats=3)
