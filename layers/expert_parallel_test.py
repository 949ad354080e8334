"""Expert parallelism (`zoo.layers.expert_parallel`) against the replicated MoE, each case in fresh
processes (`tests/expert_parallel_worker.py`): under MirroredStrategy on 2 and 4 logical CPUs and with 2
worker processes on localhost, for a GCNN with an MoE layer and an LSTM–MoE–LSTM stack trained by
the factorised Adam with clipping:

- 20 expert-parallel steps (capacity enough that nothing drops) equal the replicated ones: the
  losses, the outputs and every weight gathered back (the unsharded final preset) to 1e-5 (and
  for the hierarchical mixture of Appendix B under MirroredStrategy on 2);
- each replica holds 1/R of the expert variables, and the all-reduced gradients lose the experts;
- the last checkpoint holds every expert whole (the tensors of the unsharded preset);
- capacity factor 1.0 on an unbalanced batch: the drop metric equals the count by hand, the
  outputs the experts computed by hand, and training stays finite;
- bad input: one sentence each, nothing written;
- (slow) a 2-worker job killed with SIGKILL and restarted ends with the weights of an unbroken one.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

# the distributed tests' process helpers and their generated Zipf corpus (a fixture)
from tests.distributed_test import _env, _free_ports, _wait, corpus  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository (this file is in layers/)
WORKER = os.path.join(ROOT, "tests", "expert_parallel_worker.py")
EXPERTS = 4


def _start(mode, corpus, out, result, *models, workers=1, pause=None):
    ports = _free_ports(workers)
    procs = []
    for index in range(workers):
        extra = {}
        if mode in ("worker", "resume"):
            extra["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                             "task": {"type": "worker", "index": index}})
        if pause:
            extra["ZOO_TEST_PAUSE_FILE"] = f"{pause}-{index}"
        procs.append(subprocess.Popen([sys.executable, WORKER, mode, corpus, out, result, *models],
                                      env=_env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def _run(mode, corpus, out, result, *models, workers=1):
    _wait(_start(mode, corpus, out, result, *models, workers=workers))
    with open(result) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def start(corpus, tmp_path_factory):
    """The common starting presets (one step on one device)."""
    out = str(tmp_path_factory.mktemp("ep"))
    _wait([subprocess.Popen([sys.executable, WORKER, "init", corpus, out], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)])
    return out


@pytest.mark.ci  # trains under 2 and 4 replicas and two worker processes
@pytest.mark.parametrize("mode, workers", [("mirrored:2", 1), ("mirrored:4", 1), ("worker", 2)])
def test_expert_parallel_steps_equal_the_replicated_ones(mode, workers, corpus, start, tmp_path):
    result = _run(mode, corpus, start, str(tmp_path / "result.json"), "gcnn", "stack", workers=workers)
    replicas = int(mode.split(":")[1]) if ":" in mode else workers
    for name in ("gcnn", "stack"):
        r = result[name]
        losses = r["losses"]
        assert len(losses["expert_parallel"]) == 20
        np.testing.assert_allclose(losses["expert_parallel"], losses["replicated"], rtol=0, atol=1e-5, err_msg=name)
        assert losses["replicated"][-1] < losses["replicated"][0]  # it trained
        assert r["shapes_equal"] and r["max_weight_difference"] <= 1e-5, r
        assert r["max_output_difference"] <= 1e-5, r
        assert r["dropped"] and all(d == 0 for d in r["dropped"]), r["dropped"]
        # memory: each replica holds 1/R of the experts; the all-reduce loses exactly them
        b = r["bytes"]
        assert b["expert_parallel"]["experts"] * replicas == b["replicated"]["experts"]
        assert b["replicated"]["all_reduced"] - b["expert_parallel"]["all_reduced"] == b["replicated"]["experts"]
        # the last checkpoint holds the four expert tensors whole, equal to the unsharded preset's
        ckpt = r["checkpoint_experts"]
        assert ckpt["matched"] == ckpt["experts"] and len(ckpt["experts"]) == 4, ckpt
    assert result["gcnn"]["export_max_difference"] <= 1e-5  # the unsharded preset exports


@pytest.mark.ci  # trains under 2 and 4 replicas and two worker processes
def test_the_hierarchical_mixture_too(corpus, start, tmp_path):
    r = _run("mirrored:2", corpus, start, str(tmp_path / "result.json"), "hierarchical")["hierarchical"]
    losses = r["losses"]
    np.testing.assert_allclose(losses["expert_parallel"], losses["replicated"], rtol=0, atol=1e-5)
    assert r["max_weight_difference"] <= 1e-5 and r["max_output_difference"] <= 1e-5, r
    assert all(d == 0 for d in r["dropped"]) and len(r["checkpoint_experts"]["matched"]) == 4


@pytest.mark.ci  # trains under 2 and 4 replicas and two worker processes
def test_capacity_factor_one_on_an_unbalanced_batch(corpus, start, tmp_path):
    d = _run("mirrored:2", corpus, start, str(tmp_path / "result.json"), "dropped")["dropped"]
    assert d["by_hand"] > 0 and d["metric"] == d["by_hand"], d
    assert d["max_output_difference"] <= 1e-5 and d["zero_rows"] > 0, d
    assert all(np.isfinite(d["losses"])) and len(d["losses"]) == 6
    assert d["trained_dropped"] > 0


@pytest.mark.ci
def test_bad_input_is_one_sentence_each(corpus, start, tmp_path):
    e = _run("mirrored:2", corpus, start, str(tmp_path / "result.json"), "errors")["errors"]
    expected = {
        "indivisible": ["num_experts=3", "2 replicas"],
        "capacity_zero": ["capacity_factor", "> 0", "got 0"],
        "capacity_negative_config": ["capacity_factor", "got -1.0"],
        "one_replica_layer": ["more than one replica", "got 1 replica"],
        "one_replica_train": ["more than one replica", "got 1"],
        "no_moe": ["SparseMoE", "'gcnn-ptb'"],
        "mixed_precision": ["mixed precision"],
        "averaged": ["Weight averaging (use_ema)", "expert parallelism"],
    }
    for case, words in expected.items():
        message = e[case]
        assert message and "\n" not in message and message.endswith("."), (case, message)
        for word in words:
            assert word in message, (case, message)
    assert e["untouched"] == []  # no run directory was made


@pytest.mark.slow
def test_a_killed_expert_parallel_job_resumes_exactly(corpus, start, tmp_path):
    """2 workers, a checkpoint every step; both killed with SIGKILL after step 6, the job started
    again: the final weights are those of a job never killed, to 1e-6."""
    reference = str(tmp_path / "reference.json")
    _wait(_start("resume", corpus, start, reference, workers=2))
    broken, pause = str(tmp_path / "broken.json"), str(tmp_path / "pause")
    procs = _start("resume", corpus, start, broken, workers=2, pause=pause)
    deadline = time.monotonic() + 300
    while not (os.path.exists(f"{pause}-1") and len(open(f"{pause}-1").read().split()) >= 6):
        assert all(p.poll() is None for p in procs), procs[1].communicate()[1][-4000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for p in procs[::-1]:
        p.send_signal(signal.SIGKILL)
        p.wait()
    done = len(open(f"{pause}-0").read().split())
    assert done < 20
    _wait(_start("resume", corpus, start, broken, workers=2))
    with open(reference) as f:
        want = json.load(f)["weights"]
    with open(broken) as f:
        got = json.load(f)["weights"]
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=0, atol=1e-6)
