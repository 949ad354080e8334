"""Fast checks of `zoo benchmark moe-parallel` (tools/benchmarks/moe_parallel.py) at tiny sizes: one child
process with 4 logical CPUs (one warm-up-free timed step per model), the exact memory accounting
against the formulas, and the paper model of Appendix D's MoE-65536-h (the arithmetic:
zoo/models/compute_test.py)."""

import json
import math

import pytest


@pytest.fixture(scope="module")
def bench():
    from zoo.tools.benchmarks import moe_parallel

    return moe_parallel


def quiet(*args, **kwargs):
    pass


def expert_params(e, d, h):
    return e * (d * h + h + h * d + d)  # output width = input width


@pytest.mark.ci  # worker processes of two and four replicas
def test_tiny_run_measures_steps_and_holds_one_r_th_of_the_experts(bench, tmp_path):
    sizes = dict(bench.SMALL)  # 8 experts, k=2, hidden 16, width 8, batch 8 x 8
    e, k, h, d, r = sizes["experts"], sizes["k"], sizes["hidden"], sizes["width"], 4
    report = bench.run_benchmark(sizes, [r], [2.0], warmup=0, repeats=1, paper_names=[], log=quiet)
    assert report["paper"] is None
    result = report["measured"][r]
    assert result["replicas"] == r and len(result["devices"]) == r
    replicated, parallel = result["models"]["replicated"], result["models"]["expert-parallel cf 2"]
    for m in (replicated, parallel):
        assert m["median_s"] > 0 and len(m["times_s"]) == 1 and m["losses_finite"]
    assert replicated["vs_replicated"] == 1.0
    assert parallel["vs_replicated"] == pytest.approx(parallel["median_s"] / replicated["median_s"])
    assert replicated["paired_ratio"] == 1.0  # one round: the paired ratio is that round's
    assert parallel["paired_ratio"] == pytest.approx(parallel["times_s"][0] / replicated["times_s"][0])
    assert replicated["params"] == parallel["params"] + expert_params(e, d, h) * (r - 1) // r  # a replica's view
    assert 0.0 <= parallel["dropped_fraction"] <= 1.0

    # Memory per replica: every replica the same; the experts and their state exactly 1/R.
    a, b = replicated["memory"], parallel["memory"]
    experts = expert_params(e, d, h) * 4
    # FactorizedAdam: row and column vectors per expert matrix, Adam's two moments per stacked bias
    state = (e * (d + h) + e * (h + d) + 2 * e * h + 2 * e * d) * 4
    assert a["experts"] == [experts] * r and b["experts"] == [experts // r] * r
    assert a["expert_state"] == [state] * r and b["expert_state"] == [state // r] * r
    assert a["other"] == b["other"] and len(set(a["other"])) == 1
    assert a["other_state"] == b["other_state"] and len(set(a["other_state"])) == 1
    assert not a["expert_parallel"] and b["expert_parallel"]
    # All-reduced per step: the experts leave it.
    assert a["all_reduced_experts"] == experts and b["all_reduced_experts"] == 0
    assert b["all_reduced"] == a["all_reduced"] - experts
    assert a["embedding"] == b["embedding"] == sizes["vocabulary"] * d * 4
    # The exchange: [R, E/R, capacity, d] blocks, capacity = ceil(2 * tokens per replica * k / E).
    tokens = sizes["batch"] // r * sizes["seq_len"]
    capacity = math.ceil(2.0 * tokens * k / e)
    assert parallel["exchange"] == {"capacity": capacity, "block_bytes": e * capacity * d * 4,
                                    "sent_bytes": 4 * e * capacity * d * 4 * (r - 1) // r}
    json.dumps(report)  # the report is JSON as it stands


def test_the_paper_model_counts_appendix_ds_model_with_the_library(bench):
    """The arithmetic is zoo.models.compute's (its tests); here, MoE-65536-h built from moe-4096-h."""
    paper = bench.paper_model(["moe-65536-h"], {"gpus": (64,), "tokens_per_gpu": None})
    shapes, rows = paper["models"]["moe-65536-h"], {row["mode"]: row for row in paper["rows"]}
    assert (shapes["base_preset"], shapes["num_experts"], shapes["groups"]) == ("moe-4096-h", 65536, 256)
    assert paper["assumptions"]["tokens_per_gpu"] == 18_750 and paper["assumptions"]["gpus"] == (64,)
    # Appendix D's 65,536 experts do not fit one GPU replicated; sharded over 64 they do.
    assert not rows["replicated"]["fits"] and rows["expert-parallel"]["fits"]
    assert rows["expert-parallel"]["experts_per_gpu"] == 1024 and rows["expert-parallel"]["model"] == "moe-65536-h"


def test_bad_sizes_are_refused(bench):
    sizes = dict(bench.SMALL)
    with pytest.raises(ValueError, match="divisible"):
        bench.check_sizes(dict(sizes, experts=6), [4], [2.0])
    with pytest.raises(ValueError, match=">= 2"):
        bench.check_sizes(sizes, [1], [2.0])
    with pytest.raises(ValueError, match="capacity"):
        bench.check_sizes(sizes, [2], [0.0])
