"""Fast checks of `zoo benchmark moe-parallel` (tools/benchmarks/moe_parallel.py) at tiny sizes: one child
process with 4 logical CPUs (one warm-up-free timed step per model), the exact memory accounting
against the formulas, and the paper model's arithmetic."""

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


def test_paper_model_arithmetic(bench):
    shapes = bench.paper_shapes("moe-4096-h")
    assert shapes["experts"] == expert_params(4096, 512, 1024)  # Appendix C: 4096 experts of ~1M parameters
    assert shapes["embedding"] == 793_471 * 512
    assert shapes["assignments_per_token"] == 4  # k = 2 at each of the two levels
    assert shapes["expert_state"] == 4096 * ((512 + 1024) * 2 + 2 * (1024 + 512)) * 4
    rows = {(row["gpus"], row["mode"]): row for row in bench.paper_rows(shapes, gpus=(8, 64))}
    experts, dense = shapes["experts"] * 4, shapes["dense"] * 4
    for gpus, link in ((8, 300e9), (64, 100e9 / 8)):
        rep, par = rows[gpus, "replicated"], rows[gpus, "expert-parallel"]
        assert par["expert_weight_bytes"] * gpus == rep["expert_weight_bytes"] == experts
        assert par["expert_state_bytes"] * gpus == rep["expert_state_bytes"]
        assert rep["all_reduce_bytes_per_gpu"] == pytest.approx(2 * (gpus - 1) / gpus * (experts + dense))
        assert par["all_reduce_bytes_per_gpu"] == pytest.approx(2 * (gpus - 1) / gpus * dense)
        assert rep["all_to_all_bytes_per_gpu"] == 0
        assert par["all_to_all_bytes_per_gpu"] == pytest.approx(18_750 * 4 * 512 * 4 * 2 * 2 * 2.0 * (gpus - 1) / gpus)
        assert rep["all_reduce_s"] == pytest.approx(rep["all_reduce_bytes_per_gpu"] / link)
        assert rep["embedding_all_gather_bytes_per_gpu"] == par["embedding_all_gather_bytes_per_gpu"]
    # In one node the all-to-all runs on NVLink; across 8 nodes 56 of the 63 peers are remote.
    a = rows[8, "expert-parallel"]["all_to_all_bytes_per_gpu"]
    assert rows[8, "expert-parallel"]["all_to_all_s"] == pytest.approx(a / 300e9)
    b = rows[64, "expert-parallel"]["all_to_all_bytes_per_gpu"]
    assert rows[64, "expert-parallel"]["all_to_all_s"] == pytest.approx(b * 7 / 63 / 300e9 + b * 56 / 63 / 12.5e9)
    # Appendix D's 65,536 experts do not fit one GPU replicated; sharded over 64 they do.
    big = {(row["gpus"], row["mode"]): row for row in bench.paper_rows(bench.paper_shapes("moe-65536-h"))}
    assert not big[64, "replicated"]["fits"] and big[64, "expert-parallel"]["fits"]
    assert big[64, "expert-parallel"]["experts_per_gpu"] == 1024


def test_bad_sizes_are_refused(bench):
    sizes = dict(bench.SMALL)
    with pytest.raises(ValueError, match="divisible"):
        bench.check_sizes(dict(sizes, experts=6), [4], [2.0])
    with pytest.raises(ValueError, match=">= 2"):
        bench.check_sizes(sizes, [1], [2.0])
    with pytest.raises(ValueError, match="capacity"):
        bench.check_sizes(sizes, [2], [0.0])
