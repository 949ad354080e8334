"""`zoo benchmark fairseq`'s zoo-side pieces, without torch: the counts behind its shares of the
machine's limit, its inputs, its summary and its command line, and (the `ci` tier) its export
figures from `zoo export` and a fresh process."""

import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.tools import benchmarks
from zoo.tools.benchmarks import fairseq as bench

# embedding 4 → fc1 → conv (8 wide, kernel 2) → conv (16 wide, kernel 1, a projection on its
# residual path); adaptive softmax 4/8 over 16 ids, the 2018 format (tail i projects to d // 4^i)
TINY = {"arch": bench.ARCH, "embed_dim": 4, "layers": "[(8, 2)] + [(16, 1)]", "cutoffs": "4,8", "words": 12,
        "softmax": "2018", "dropout": 0.1}


def converted(spec):
    """The zoo's model of `spec` as `zoo convert fairseq` builds it (the converter's own grouping)."""
    from zoo.convert.fairseq import group_blocks, parse_layers
    from zoo.models.gcnn import GCNNLanguageModel

    blocks, residual, _ = group_blocks(parse_layers(spec["layers"]))
    return GCNNLanguageModel(vocabulary_size=spec["words"] + 4, embedding_dim=spec["embed_dim"], blocks=blocks,
                             cutoffs=[int(c) for c in spec["cutoffs"].split(",")], input_projection=True,
                             residual=residual, residual_scale=0.5**0.5, head_bias=False,
                             adaptive_softmax_2018=spec["softmax"] == "2018")


def test_the_cost_of_a_token_is_counted_from_the_converted_model_by_hand():
    cost = bench.cost(converted(TINY))
    # fc1 4·8, conv0 2·8·16, conv1 1·8·32, its residual projection 8·16, the head 16·(4 + 2 clusters)
    assert cost["multiply_adds"] == 32 + 256 + 256 + 128 + 96
    # the 2018 format: tail i projects to d // 4^i: 16·16 + 16·4, then 16·4 + 4·8
    assert cost["tails"] == [256 + 64, 64 + 32] and cost["cutoffs"] == [4, 8] and cost["embedding_dim"] == 4
    assert bench.generation_bytes_per_token(cost) == 4 * (1184 + 4)  # every matrix and one embedding row
    # today's format projects cluster i to d // 4^(i+1)
    assert bench.cost(converted({**TINY, "softmax": "current"}))["tails"] == [16 * 4 + 4 * 4, 16 * 1 + 1 * 8]


def test_flops_count_the_targets_clusters():
    cost = bench.cost(converted(TINY))
    # stack and head 2·768, cluster 0 (2·320) for half the targets, cluster 1 (2·96) for a quarter
    assert bench.scoring_flops_per_token(cost, [0.5, 0.25]) == 1536 + 320 + 48
    assert bench.scoring_flops_per_token(cost, [0, 0]) == 1536
    assert bench.cluster_shares(cost, [[0, 3, 4, 7], [8, 15, 2, 9]]) == [2 / 8, 3 / 8]


def test_windows_start_at_the_line_end_and_hold_words():
    ids = bench.windows(TINY, 3, 50, seed=0)
    assert ids.shape == (3, 51)
    assert (ids[:, 0] == 2).all()
    assert ids[:, 1:].min() >= 4 and ids[:, 1:].max() < TINY["words"] + 4
    np.testing.assert_array_equal(ids, bench.windows(TINY, 3, 50, seed=0))


def test_summary_ratios_and_shares():
    def runs(rate):  # three answers of `rate` tokens/s
        return [{"s": 2.0, "tokens": 2 * rate}] * 3

    out = {"limits": {"matmul": {"fairseq": [{"gflops": 100.0}] * 3, "zoo": [{"gflops": 80.0}] * 3},
                      "copy": {"fairseq": [{"gbs": 20.0}] * 3, "zoo": [{"gbs": 25.0}] * 3}},
           "scoring": {"runs": {"fairseq": runs(1000), "zoo": runs(2000)}, "flops_per_token": 1e7,
                       "cluster_shares": [0.25, 0.5]},
           "generation": {1: {"runs": {"fairseq": runs(10), "zoo": runs(40)}, "bytes_per_token": 1e8},
                          8: {"runs": {"fairseq": runs(50), "zoo": runs(100)}, "bytes_per_token": 1e8}},
           "training": {"runs": {"fairseq": runs(300), "zoo": runs(600)}, "flops_per_token": 3e7}}
    bench.summarise(out)
    assert out["machine_limit"] == {"matmul_gflops": 100.0, "copy_gbs": 25.0}  # each the best side's
    scoring, batch1, batch8, training = out["table"]
    assert scoring["ratio"] == 2.0 and scoring["share_zoo"] == pytest.approx(2000 * 1e7 / 1e9 / 100)
    assert batch1["ratio"] == 4.0 and batch1["share_fairseq"] == pytest.approx(10 * 1e8 / 1e9 / 25)
    assert batch8["share_zoo"] is None
    assert training["share_fairseq"] == pytest.approx(300 * 3e7 / 1e9 / 100)
    table = bench.markdown({"command": "zoo benchmark fairseq", "cpu": "a CPU", "threads": 2, **out,
                            "scoring": {**out["scoring"], "max_abs_diff": 1e-6},
                            "generation": {b: {**g, "same_tokens": 1.0} for b, g in out["generation"].items()}})
    assert "| scoring, tokens/s | 1,000.0 | 2,000.0 | 2.00× | 10% / 20% |" in table
    assert "| greedy generation batch 8, new tokens/s | 50.0 | 100.0 | 2.00× | - |" in table
    assert "scoring 10.0 MFLOP per token (targets in the tail clusters: 25.0%, 50.0%)" in table


def test_pyspy_summary(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("main (a.py:1);f (b.py:2);sgemm (libtorch.so) 6\n"
                   "main (a.py:1);g (b.py:9) 3\n"
                   "main (a.py:1);f (b.py:2);memset (libc.so) 1\n")
    found = bench.pyspy_summary(str(raw))
    assert found["leaf"][0] == ("sgemm (libtorch.so)", 0.6)
    assert dict(found["python"]) == {"f (b.py:2)": 0.7, "g (b.py:9)": 0.3}


def test_registered_and_flags_parse():
    assert benchmarks.module("fairseq") is bench
    args = bench.parse_args(["--torch-python", "/x/python", "--fairseq", "/src", "--repeats", "3", "--small",
                             "--profile", "--threads", "2", "--json", "out.json"])
    assert (args.torch_python, args.fairseq, args.repeats, args.small, args.profile) == ("/x/python", "/src", 3,
                                                                                        True, True)
    with pytest.raises(SystemExit):
        bench.parse_args(["--repeats", "0"])


def test_a_bad_torch_python_is_named(tmp_path, capsys):
    missing = str(tmp_path / "no" / "python")
    with pytest.raises(SystemExit, match=f"--torch-python '{missing}' is not an executable file"):
        bench.main(["--torch-python", missing, "--fairseq", str(tmp_path)])
    with pytest.raises(SystemExit, match="needs --torch-python PATH"):
        bench.main(["--fairseq", str(tmp_path)])


def test_a_python_without_torch_is_refused():
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("this Python has torch")
    with pytest.raises(ValueError, match="cannot import torch and numpy"):
        bench.check_torch_python(sys.executable)


def test_fairseq_sources_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"has no v0.12.2/fairseq/models/fconv.py"):
        bench.check_fairseq_sources(str(tmp_path))
    (tmp_path / "v0.12.2" / "fairseq" / "models").mkdir(parents=True)
    (tmp_path / "v0.12.2" / "fairseq" / "models" / "fconv.py").write_text("")
    with pytest.raises(ValueError, match=r"has no 2018/fairseq/modules/adaptive_softmax.py"):
        bench.check_fairseq_sources(str(tmp_path))
    with pytest.raises(ValueError, match="needs --fairseq SRC"):
        bench.check_fairseq_sources(None)


def test_torch_side_is_standalone():
    """fairseq_torch.py imports neither the zoo nor TensorFlow (it runs under another Python)."""
    with open(os.path.join(os.path.dirname(bench.__file__), "fairseq_torch.py")) as f:
        source = f.read()
    assert "import zoo" not in source and "from zoo" not in source and "tensorflow" not in source


@pytest.mark.ci  # two fresh processes: `zoo export`, then one that loads the export and calls it
def test_the_export_figures_come_from_zoo_export_and_a_fresh_process(tmp_path):
    from zoo.tools.benchmarks.common import with_stand_in_vocabulary

    with_stand_in_vocabulary(converted(bench.SIZES["tiny"])).save_to_preset(str(tmp_path / "full" / "preset"))
    out = bench.export(str(tmp_path))
    fresh = out["fresh_process"]
    assert out["bytes"] > 0 and out["export_s"] > 0 and out["export_peak_rss_mib"] > 0
    assert fresh["score_lengths"] == 20 and fresh["score_finite"] and 1 <= fresh["generate_lengths"] <= 8
    assert fresh["wall_s"] > fresh["load_s"] > 0 and fresh["peak_rss_mib"] > 0
