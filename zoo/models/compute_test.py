"""Computation per token counted from the architecture (`zoo.models.compute`): exact counts on a
tiny GCNN with a mixture of experts and with its dense twin, and the shipped pair's equality."""

import pytest

import zoo
from zoo.models.compute import multiply_adds_per_token

from tests.model_checks import MOE_EN, assert_causal

TINY = {"embedding_dim": 8, "blocks": [[[4, 8]], [[4, 8]]]}


def test_counts_by_hand_for_a_mixture_and_its_dense_twin(tiny_model):
    moe = tiny_model("gcnn", **TINY, moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 16})
    dense = tiny_model("gcnn", **TINY, feed_forward={"after_blocks": [0], "hidden_units": 32})
    vocabulary = moe.vocabulary_size
    conv = 4 * 8 * 16  # kernel 4 × width 8 × 2·8 GLU channels
    head = 8 * vocabulary  # a full softmax
    # the gate 8·4, and 2 experts of 8→16→8 (not the other two)
    assert multiply_adds_per_token(moe)["parts"] == {"block_0": conv, "moe_0": 8 * 4 + 2 * (8 * 16 + 16 * 8),
                                                     "block_1": conv, "head": head}
    assert multiply_adds_per_token(dense)["parts"] == {"block_0": conv, "feed_forward_0": 8 * 32 + 32 * 8,
                                                       "block_1": conv, "head": head}
    # twice the experts: twice the parameters of the experts, the computation only by the gate's 8·4
    bigger = tiny_model("gcnn", **TINY, moe={"after_blocks": [0], "num_experts": 8, "k": 2, "hidden_units": 16})
    assert multiply_adds_per_token(bigger)["total"] - multiply_adds_per_token(moe)["total"] == 8 * 4
    assert bigger.count_params() - moe.count_params() > 4 * (8 * 16 + 16 + 16 * 8 + 8)


def test_hierarchical_gate_and_adaptive_softmax_are_counted(tiny_model):
    model = tiny_model("gcnn", embedding_dim=8, blocks=[[[2, 16]]], cutoffs=[10, 30],
                       moe={"after_blocks": [0], "num_experts": 8, "k": [2, 1], "groups": 4, "hidden_units": 4})
    parts = multiply_adds_per_token(model)["parts"]
    # primary gate 16·4, two secondary gates of 16·2, two experts of 16→4→16
    assert parts["moe_0"] == 16 * 4 + 2 * 16 * 2 + 2 * (16 * 4 + 4 * 16)
    head = model.head
    assert parts["head"] == 16 * head.head_size + sum(16 * head.tail_width(16, i) + head.tail_width(16, i) * size
                                                      for i, size in enumerate([20, model.vocabulary_size - 30]))


def test_the_english_mixture_and_its_twin_are_causal_and_have_the_same_computation():
    models = {name: zoo.load(name) for name in MOE_EN}
    for model in models.values():
        assert_causal(model)
    moe, dense = (multiply_adds_per_token(models[name]) for name in MOE_EN)
    assert abs(moe["total"] / dense["total"] - 1) < 0.05
    assert moe["parts"]["moe_3"] - dense["parts"]["feed_forward_3"] == 256 * 64  # the gate, and only it


def test_other_families_are_refused_in_one_sentence(tiny_model):
    with pytest.raises(ValueError, match="counted for GCNN models; got a StackLanguageModel"):
        multiply_adds_per_token(tiny_model("lstm"))


def expert_params(e, d, h):
    return e * (d * h + h + h * d + d)  # output width = input width


def test_expert_parallel_cost_of_moe_4096_h_by_hand():
    from zoo.models.compute import expert_parallel_cost, training_shapes

    shapes = training_shapes("moe-4096-h")
    assert shapes["experts"] == expert_params(4096, 512, 1024)  # Appendix C: 4096 experts of ~1M parameters
    assert shapes["embedding"] == 793_471 * 512
    assert shapes["assignments_per_token"] == 4  # k = 2 at each of the two levels
    assert shapes["expert_state"] == 4096 * ((512 + 1024) * 2 + 2 * (1024 + 512)) * 4  # FactorizedAdam's
    rows = {(row["gpus"], row["mode"]): row for row in expert_parallel_cost(shapes, gpus=(8, 64))}
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
    # 4096 experts split over 8 and 64 GPUs; a count they do not split over is skipped, not guessed
    assert expert_parallel_cost(shapes, gpus=(3,))[1] == {"gpus": 3, "mode": "expert-parallel",
                                                         "skipped": "4096 experts do not split over 3 GPUs"}
