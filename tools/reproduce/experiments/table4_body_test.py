"""table4-body (experiments/table4_body.py) through `zoo reproduce --quick`: the body timed beside
the scoring, the bfloat16 and XLA bodies checked against the plain one, and an older record redrawn."""

import json
import math
import os

import numpy as np
import pytest

from tests.reproduce_checks import PNG_SIGNATURE
from zoo.tools import cli
from zoo.tools.reproduce.experiments import table4


@pytest.mark.ci
def test_table4_body_quick_times_the_body_beside_the_scoring_and_checks_the_prompt_pass(tmp_path):
    out = str(tmp_path / "results")
    assert cli.main(["reproduce", "table4-body", "--quick", "--out", out]) == 0
    with open(os.path.join(out, "table4-body.json")) as f:
        result = json.load(f)
    figs = {f["id"]: f for f in result["figures"]}
    calls = ("scoring", "body", "body-xla", "body-bf16", "prompt")
    for preset in ("lstm-2048-512", "gcnn-9", "gcnn-8b"):
        for call in calls:
            assert math.isfinite(figs[f"{call}/{preset}"]["ours"]) and figs[f"{call}/{preset}"]["ours"] > 0
    for call in calls:
        assert figs[f"ratio-{call}/gcnn-8b"]["ours"] == pytest.approx(
            figs[f"{call}/gcnn-8b"]["ours"] / figs[f"{call}/lstm-2048-512"]["ours"])
    # Table 4's own LSTM-2048, unprojected: its body alone, the GCNNs' bodies over it
    assert "scoring/lstm-2048" not in figs and figs["body/lstm-2048"]["ours"] > 0
    # each body at its fastest of plain, XLA and bfloat16, over the LSTM's at its fastest
    fastest = {p: max(figs[f"{c}/{p}"]["ours"] for c in ("body", "body-xla", "body-bf16")) for p in ("lstm-2048-512", "gcnn-8b")}
    assert figs["ratio-body-fastest/gcnn-8b"]["ours"] == pytest.approx(fastest["gcnn-8b"] / fastest["lstm-2048-512"])
    assert figs["ratio-body-fastest/gcnn-8b"]["goal"] == 10
    # the bfloat16 body is the float32 one to bfloat16's precision, and not the float32 one itself
    assert set(result["bf16_checks"]) == {"lstm-2048-512", "gcnn-9", "gcnn-8b"}
    assert all(0 < v < 0.05 for v in result["bf16_checks"].values()), result["bf16_checks"]
    assert figs["ratio-body-unprojected/gcnn-8b"]["ours"] == pytest.approx(
        figs["body/gcnn-8b"]["ours"] / figs["body/lstm-2048"]["ours"])
    assert result["trunk_params"]["lstm-2048"] > result["trunk_params"]["lstm-2048-512"]
    assert figs["ratio-body/gcnn-8b"]["goal"] == 10 and figs["ratio-body/gcnn-8b"]["paper"] is None
    # the paper's ratio is against its own LSTM-2048, the unprojected one
    assert figs["ratio-body-unprojected/gcnn-8b"]["paper"] == pytest.approx(45_878 / 2_282)
    # the prompt pass's hidden state is the body's at the last position, the XLA body the plain one
    assert set(result["checks"]) == {f"{p}/{c}" for p in ("lstm-2048-512", "gcnn-9", "gcnn-8b") for c in ("body-xla", "prompt")}
    assert max(result["checks"].values()) < 1e-4
    # multiply-adds per token: the trunk's parameters, neither the embedding nor the output layer
    import zoo

    quick = zoo.load("gcnn-8b", weights="random", **table4.MODELS[2]["quick"])
    trunk = sum(int(np.prod(w.shape)) for w in quick.weights if "/block_" in w.path)
    assert result["trunk_params"]["gcnn-8b"] == trunk
    assert figs["body/gcnn-8b"]["measured"]["gflops"] == pytest.approx(2 * trunk * figs["body/gcnn-8b"]["ours"] / 1e9)
    with open(os.path.join(out, "table4-body.png"), "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    # a record measured before the bfloat16 column existed still redraws, with its own calls only
    old = dict(result, units={k: u for k, u in result["units"].items() if "/body-bf16/" not in k},
               settings=dict(result["settings"], calls=[c for c in result["settings"]["calls"] if c != "body-bf16"]))
    old_out = tmp_path / "old"
    old_out.mkdir()
    with open(old_out / "table4-body.json", "w") as f:
        json.dump(old, f)
    assert cli.main(["reproduce", "table4-body", "--redraw", "--out", str(old_out)]) == 0
    with open(old_out / "table4-body.json") as f:
        redrawn = {f["id"]: f for f in json.load(f)["figures"]}
    assert not any("bf16" in key for key in redrawn) and redrawn["ratio-body/gcnn-8b"]["ours"] == figs["ratio-body/gcnn-8b"]["ours"]
    assert redrawn["ratio-body-fastest/gcnn-8b"]["calls"][0] in ("body", "body-xla")
