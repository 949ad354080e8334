"""Distributed training equals training on one device, and a killed run resumes exactly.

- `fit` under MirroredStrategy (two logical CPU devices) equals `fit` on one device.
- `zoo.training.train` under MirroredStrategy, and with two worker processes on localhost under
  MultiWorkerMirroredStrategy, gives the per-step losses and final weights of one process with
  the same global batch, for a GCNN with an adaptive softmax and for an MoE model.
- A run killed with SIGKILL after its step-20 checkpoint and started again ends with the
  weights of a run never killed; a corrupt newest checkpoint is reported and skipped.

Logical devices and multi-worker collectives are configured when TensorFlow starts, so these
runs happen in fresh processes (`distributed_worker.py`).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "distributed_worker.py")


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """60 word types with Zipf frequencies (so an adaptive softmax with cutoffs [10, 30] has
    every cluster in use), sentences of 3–11 words."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(60)]
    p = 1.0 / np.arange(1, 61)
    p /= p.sum()
    root = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 200), ("valid", 20), ("test", 20)):
        lines = [" ".join(rng.choice(words, size=rng.integers(3, 12), p=p)) for _ in range(n)]
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(root)


def _run_worker(mode, corpus, out, result, models, env=None, timeout=600):
    proc = subprocess.run([sys.executable, WORKER, mode, corpus, out, result, *models],
                          capture_output=True, text=True, env=env or _env(), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(result) as f:
        return json.load(f)


def _assert_same_run(a, b, loss_rtol=1e-5, weight_atol=1e-5):
    assert len(a["losses"]) == len(b["losses"]) == 20
    np.testing.assert_allclose(b["losses"], a["losses"], rtol=loss_rtol)
    for x, y in zip(a["weights"], b["weights"]):
        np.testing.assert_allclose(np.array(y), np.array(x), rtol=loss_rtol, atol=weight_atol)
    assert a["losses"][-1] < a["losses"][0]  # training moved, so equality is not vacuous


@pytest.mark.ci  # zoo train runs on one and on two devices
def test_train_under_mirrored_strategy_matches_one_device(corpus, tmp_path):
    result = _run_worker("mirrored", corpus, str(tmp_path), str(tmp_path / "r.json"), ["gcnn", "moe"])
    for model in ("gcnn", "moe"):
        _assert_same_run(result[f"{model}-single"], result[f"{model}-mirrored"])
    assert result["batch_error"] == ("The global batch size 7 is not divisible by the 2 replicas in "
                                     "sync; use a multiple of 2.")
    assert not os.path.exists(tmp_path / "odd")  # refused before anything was written


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start_workers(args, ports):
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for index in range(len(ports)):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        procs.append(subprocess.Popen(args(index), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=_env(TF_CONFIG=tf_config)))
    return procs


def _wait(procs, timeout=600):
    outputs = [p.communicate(timeout=timeout) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-4000:]
    return outputs


@pytest.mark.ci  # two worker processes and one reference process
def test_two_workers_on_localhost_match_one_process(corpus, tmp_path):
    models = ["gcnn", "moe"]
    procs = _start_workers(
        lambda i: [sys.executable, WORKER, "worker", corpus, str(tmp_path / "run"),
                   str(tmp_path / f"worker{i}.json"), *models], _free_ports(2))
    single = _run_worker("single", corpus, str(tmp_path / "single"), str(tmp_path / "single.json"), models)
    _wait(procs)
    workers = [json.load(open(tmp_path / f"worker{i}.json")) for i in range(2)]
    for model in models:
        for worker in workers:
            _assert_same_run(single[f"{model}-single"], worker[f"{model}-worker"])
    # fit refuses at once, in one sentence that points to `zoo train`
    assert "zoo train --strategy multi_worker_mirrored" in workers[0]["fit_error"]
    assert "\n" not in workers[0]["fit_error"]
    # only the chief wrote the run's files; no worker's scratch checkpoint is left behind
    for model in models:
        run = tmp_path / "run" / f"{model}-worker"
        assert sorted(os.listdir(run)) == ["best", "checkpoints", "final", "history.json", "logs", "run.json"]
        assert not [n for n in os.listdir(run / "checkpoints") if n.startswith(".worker")]
        from zoo.training import checkpoint_steps

        assert checkpoint_steps(str(run / "checkpoints"))[0] == 20  # and at every epoch end


# ---- kill and resume -------------------------------------------------------------------------
TRAIN_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from zoo.training import Callback, TrainConfig, train

    def on_step(step, loss):
        # The first run, once step 22 is done (its step-20 checkpoint written), waits to be killed.
        if step == 22 and os.environ.get("ZOO_TEST_PAUSE_FILE"):
            open(os.environ["ZOO_TEST_PAUSE_FILE"], "w").close()
            time.sleep(600)

    corpus, out = sys.argv[1:3]
    strategy = sys.argv[3] if len(sys.argv) > 3 else "default"
    train("gcnn-moe-ptb", data=corpus, out_dir=out, strategy=strategy,
          config=TrainConfig(global_batch_size=8, seq_len=12, steps=40, checkpoint_every=10, tokenizer="word",
                             steps_per_epoch=20, seed=5),
          overrides=dict(embedding_dim=8, blocks=[[[3, 16]], [[3, 16]]], dropout=0.1, cutoffs=[10, 30],
                         moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8},
                         optimizer={"name": "factorized_adam", "learning_rate": 0.01}),
          callbacks=[Callback(on_step_end=on_step)])
    """
)


def _final_weights(run):
    import h5py

    values = {}
    with h5py.File(os.path.join(run, "final", "model.weights.h5"), "r") as f:
        f.visititems(lambda name, obj: values.__setitem__(name, obj[()]) if hasattr(obj, "shape") else None)
    return values


def _train(corpus, out, env=None, wait=True):
    args = [sys.executable, "-c", TRAIN_SCRIPT, corpus, out]
    if not wait:
        return subprocess.Popen(args, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = subprocess.run(args, env=env or _env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    """40 steps with checkpoints every 10 (dropout and gating noise on, so the random
    generators' states must be restored too; the factorised Adam, whose factored slots must be
    restored), never interrupted."""
    out = str(tmp_path_factory.mktemp("uninterrupted"))
    _train(corpus, out)
    return out


@pytest.mark.ci  # interrupted and resumed training runs
def test_killed_run_resumes_and_ends_with_the_same_weights(corpus, uninterrupted, tmp_path):
    out, pause = str(tmp_path / "run"), str(tmp_path / "paused")
    proc = _train(corpus, out, env=_env(ZOO_TEST_PAUSE_FILE=pause), wait=False)
    deadline = time.monotonic() + 300
    while not os.path.exists(pause):
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "the run never reached step 22"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not os.path.exists(os.path.join(out, "final"))
    from zoo.training import checkpoint_steps

    assert checkpoint_steps(os.path.join(out, "checkpoints")) == [20, 10]
    printed = _train(corpus, out)  # the same command again
    assert "Resuming from" in printed and "ckpt-20 (step 20 of 40)" in printed
    expected, got = _final_weights(uninterrupted), _final_weights(out)
    assert expected.keys() == got.keys() and len(expected) > 10
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6, err_msg=name)
    history = json.load(open(os.path.join(out, "history.json")))
    assert [h["step"] for h in history] == [20, 40]


@pytest.mark.ci  # interrupted and resumed training runs
@pytest.mark.parametrize("damage", ["truncated data", "garbage index", "index missing"])
def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(corpus, uninterrupted, tmp_path, damage):
    out = str(tmp_path / "run")
    shutil.copytree(uninterrupted, out)
    shutil.rmtree(os.path.join(out, "final"))
    ckpt = os.path.join(out, "checkpoints", "ckpt-40")
    if damage == "truncated data":
        data = ckpt + ".data-00000-of-00001"
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) // 2)
    elif damage == "garbage index":
        with open(ckpt + ".index", "wb") as f:
            f.write(b"\x00not an index" * 10)
    else:  # a save killed before its index was written: not a checkpoint at all
        os.remove(ckpt + ".index")
    printed = _train(corpus, out)
    lines = [l for l in printed.splitlines() if "unreadable" in l]
    if damage == "index missing":
        assert lines == []
    else:
        assert len(lines) == 1 and "ckpt-40 is unreadable" in lines[0] and "falling back" in lines[0]
    assert "Resuming from" in printed and "ckpt-30 (step 30 of 40)" in printed
    expected, got = _final_weights(uninterrupted), _final_weights(out)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6, err_msg=name)


# ---- fit under MirroredStrategy ----------------------------------------------------------------
FIT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import zoo

    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, size=(8, 12)).astype("int32")
    y = np.roll(x, -1, axis=1)
    w = np.ones_like(y, dtype="float32")
    w[:4, -5:] = 0.0  # uneven weights: the loss must be the mean over real tokens of the global batch

    def train(strategy):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            model = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8,
                                          blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]],
                                          cutoffs=[10, 30], dropout=0.0)
            model.compile(optimizer=keras.optimizers.SGD(0.5))
        ds = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8).repeat(3)
        history = model.fit(ds, epochs=1, verbose=0, shuffle=False)
        return history.history["loss"], [v.numpy().tolist() for v in model.weights]

    one = train(tf.distribute.OneDeviceStrategy("/cpu:0"))
    two = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    json.dump({"one": one, "two": two}, sys.stdout)
    """
)


@pytest.mark.ci
def test_mirrored_fit_with_adaptive_softmax_matches_one_device():
    out = subprocess.run([sys.executable, "-c", FIT_SCRIPT], capture_output=True, text=True, env=_env(),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().split("\n")[-1])
    (loss_one, weights_one), (loss_two, weights_two) = result["one"], result["two"]
    assert abs(loss_one[0] - loss_two[0]) <= 1e-5 * abs(loss_one[0])
    for a, b in zip(weights_one, weights_two):
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-6)
    assert loss_one[0] > 0


@pytest.mark.slow
def test_multi_worker_job_killed_and_restarted_ends_with_the_same_weights(corpus, tmp_path):
    """Two workers on localhost: worker 1 is killed with SIGKILL after step 22, the job (both
    workers) is restarted with the same commands, and the chief's final weights equal those of
    a two-worker job never killed."""
    def job(out, pause=None):
        def args(i):
            return [sys.executable, "-c", TRAIN_SCRIPT, corpus, out, "multi_worker_mirrored"]
        ports = _free_ports(2)
        cluster = {"worker": [f"localhost:{p}" for p in ports]}
        procs = []
        for index in range(2):
            env = _env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
            if pause:
                env["ZOO_TEST_PAUSE_FILE"] = f"{pause}-{index}"
            procs.append(subprocess.Popen(args(index), env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        return procs

    reference = str(tmp_path / "reference")
    _wait(job(reference))
    out, pause = str(tmp_path / "run"), str(tmp_path / "paused")
    procs = job(out, pause)
    deadline = time.monotonic() + 300
    while not os.path.exists(f"{pause}-1"):
        assert all(p.poll() is None for p in procs), procs[1].communicate()[1][-4000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    procs[1].send_signal(signal.SIGKILL)  # a worker dies ...
    procs[1].wait()
    procs[0].send_signal(signal.SIGKILL)  # ... and the job is torn down
    procs[0].wait()
    from zoo.training import checkpoint_steps

    assert checkpoint_steps(os.path.join(out, "checkpoints")) == [20, 10]
    outputs = _wait(job(out))
    assert "ckpt-20 (step 20 of 40)" in outputs[0][0]
    expected, got = _final_weights(reference), _final_weights(out)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6, err_msg=name)


AVERAGING_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import zoo
    from zoo.training import TrainConfig, train
    corpus, out = sys.argv[1], sys.argv[2]
    result = {}
    for strategy in ("default", "mirrored"):
        model, history = train("gcnn-ptb", data=corpus, out_dir=f"{out}/{strategy}", strategy=strategy,
                               config=TrainConfig(steps=7, global_batch_size=4, seq_len=8, steps_per_epoch=3),
                               overrides={"embedding_dim": 8, "blocks": [[[3, 8]]], "dropout": 0.0,
                                          "optimizer": {"name": "adam", "learning_rate": 0.05, "use_ema": True,
                                                        "ema_momentum": 0.6}},
                               log=lambda m: None)
        result[strategy] = {"final": [w.tolist() for w in zoo.load(f"{out}/{strategy}/final").get_weights()],
                            "weights": [w.tolist() for w in model.get_weights()],
                            "val": [h["val_perplexity"] for h in history]}
    print(json.dumps(result))
    """)


@pytest.mark.ci  # two training runs in a subprocess with two logical CPUs
def test_weight_averaging_under_mirrored_strategy_matches_one_device(corpus, tmp_path):
    proc = subprocess.run([sys.executable, "-c", AVERAGING_SCRIPT, corpus, str(tmp_path)], capture_output=True,
                          text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    one, two = result["default"], result["mirrored"]
    np.testing.assert_allclose(two["val"], one["val"], rtol=1e-5)
    for key in ("final", "weights"):
        for a, b in zip(one[key], two[key], strict=True):
            np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-6)
    # the saved averages are not the weights the model ended with
    assert max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(one["final"], one["weights"])) > 1e-3
