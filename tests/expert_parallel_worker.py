"""The runs `layers/expert_parallel_test.py` compares, each in a fresh process (logical devices and the
collectives are configured when TensorFlow starts).

    python expert_parallel_worker.py init CORPUS OUT                   # one device: OUT/<model>-init
    python expert_parallel_worker.py mirrored:R CORPUS OUT RESULT.json [MODEL ...]
    python expert_parallel_worker.py worker CORPUS OUT RESULT.json [MODEL ...]   # TF_CONFIG set
    python expert_parallel_worker.py resume CORPUS OUT RESULT.json     # TF_CONFIG set; see below

Besides the models, `errors` (the one-sentence refusals) and `dropped` (capacity factor 1.0 on an
unbalanced batch) can be asked for.

`init` trains each model one step on one device and keeps its final/ preset: the common
starting point. The other modes train from that preset `STEPS` steps twice under the same
strategy, replicated and expert-parallel (capacity factor = the number of experts: nothing can
be dropped), and write per-step losses, the dropped-token counts and the largest difference
between the two final presets' weights (the expert-parallel one gathered whole, as `zoo.load`
reads it on one device). `resume` trains the gcnn model expert-parallel with a checkpoint every
step (the test kills it and starts it again) and writes its final weights.
"""

import json
import os
import sys

STEPS = 20
GLOBAL_BATCH = 8
SEQ_LEN = 12

MODELS = {
    # a GCNN with an MoE layer after its first block, the factorised Adam, clipping
    "gcnn": ("gcnn-moe-ptb", {"embedding_dim": 8, "blocks": [[[3, 16]], [[3, 16]]], "dropout": 0.0,
                              "cutoffs": [10, 30],
                              "moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8,
                                      "noisy_gating": False},
                              "optimizer": {"name": "factorized_adam", "learning_rate": 0.01,
                                            "global_clipnorm": 1.0}}),
    # an LSTM–MoE–LSTM stack (4 experts, k=2), the factorised Adam, another clip
    "stack": ("lstm-moe-ptb", {"embedding_dim": 8, "dropout": 0.0,
                               "layers": [{"type": "lstm", "units": 8},
                                          {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8,
                                           "noisy_gating": False},
                                          {"type": "lstm", "units": 8}],
                               "optimizer": {"name": "factorized_adam", "learning_rate": 0.01,
                                             "global_clipnorm": 0.5}}),
    # the hierarchical mixture of Appendix B (2 groups of 2 experts, k=2 at each level) in the stack
    "hierarchical": ("lstm-moe-ptb", {"embedding_dim": 8, "dropout": 0.0,
                                      "layers": [{"type": "lstm", "units": 8},
                                                 {"type": "moe", "num_experts": 4, "k": 2, "groups": 2,
                                                  "hidden_units": 8, "noisy_gating": False},
                                                 {"type": "lstm", "units": 8}],
                                      "optimizer": {"name": "factorized_adam", "learning_rate": 0.01}}),
}
EXPERTS = 4


def _config(**kw):
    from zoo.training import TrainConfig

    return TrainConfig(global_batch_size=GLOBAL_BATCH, seq_len=SEQ_LEN, seed=3, tokenizer="word", **kw)


def _bytes_per_replica(model):
    """Bytes of the expert variables one replica holds (a shard's own shape: one replica's share),
    and bytes all-reduced per step (the gradients of the trainable variables that are not
    shards)."""
    import numpy as np

    from zoo.layers.expert_parallel import is_expert_shard

    def size(v):
        return int(np.prod(v.shape)) * 4

    experts = [v for v in model.trainable_variables if "expert_" in v.path]
    return {"experts": sum(size(v) for v in experts),
            "all_reduced": sum(size(v) for v in model.trainable_variables if not is_expert_shard(v))}


def _checkpoint_experts(run, unsharded):
    """The largest difference between the whole expert tensors in the run's last checkpoint and
    the unsharded final preset's expert weights, and the shapes found."""
    import numpy as np
    import tensorflow as tf

    path = tf.train.latest_checkpoint(os.path.join(run, "checkpoints"))
    if path is None:
        import glob
        path = sorted(glob.glob(os.path.join(run, "checkpoints", "ckpt-*.index")))[-1][: -len(".index")]
    reader = tf.train.load_checkpoint(path)
    wholes = {k: reader.get_tensor(k) for k, _ in tf.train.list_variables(path) if k.startswith("experts/")}
    weights = {w.path: w.numpy() for w in unsharded.weights if "expert_" in w.path}
    found, worst = [], 0.0
    for key, value in wholes.items():
        for path_, weight in weights.items():
            if value.shape == weight.shape and np.allclose(value, weight, atol=1e-6):
                found.append(path_)
                worst = max(worst, float(np.max(np.abs(value - weight))))
    return {"wholes": len(wholes), "matched": sorted(set(found)), "experts": sorted(weights), "worst": worst}


def _errors(strategy, corpus, out):
    """The one-sentence refusals, each as {case: message}."""
    import tensorflow as tf

    from zoo.layers import SparseMoE
    from zoo.training import TrainConfig, train

    def message(fn):
        try:
            fn()
        except ValueError as e:
            return str(e)
        return None

    def build(**kw):
        layer = SparseMoE(hidden_units=4, noisy_gating=False, **kw)
        layer.build((None, 8))

    def in_scope(**kw):
        with strategy.scope():
            build(**kw)

    quiet = lambda m: None  # noqa: E731
    small = dict(MODELS["gcnn"][1])
    os.makedirs(out, exist_ok=True)
    return {
        "indivisible": message(lambda: in_scope(num_experts=3, k=1, expert_parallel=True)),
        "capacity_zero": message(lambda: build(num_experts=4, k=1, expert_parallel=True, capacity_factor=0)),
        "capacity_negative_config": message(lambda: TrainConfig(expert_parallel=True, capacity_factor=-1.0)),
        "one_replica_layer": message(lambda: build(num_experts=4, k=1, expert_parallel=True)),
        "one_replica_train": message(lambda: train("gcnn-moe-ptb", data=corpus, out_dir=os.path.join(out, "e1"),
                                                   strategy=tf.distribute.get_strategy(),
                                                   config=_config(steps=1, expert_parallel=True),
                                                   overrides=small, log=quiet)),
        "no_moe": message(lambda: train("gcnn-ptb", data=corpus, out_dir=os.path.join(out, "e2"), strategy=strategy,
                                        config=_config(steps=1, expert_parallel=True), log=quiet,
                                        overrides={"embedding_dim": 8, "blocks": [[[3, 8]]]})),
        "mixed_precision": message(lambda: train("gcnn-moe-ptb", data=corpus, out_dir=os.path.join(out, "e3"),
                                                 strategy=strategy, log=quiet, overrides=small,
                                                 config=_config(steps=1, expert_parallel=True,
                                                                mixed_precision=True))),
        "averaged": message(lambda: train("gcnn-moe-ptb", data=corpus, out_dir=os.path.join(out, "e4"),
                                          strategy=strategy, log=quiet, config=_config(steps=1, expert_parallel=True),
                                          overrides=dict(small, optimizer={"name": "adam", "use_ema": True}))),
        "untouched": sorted(os.listdir(out)),
    }


def _dropped(strategy, corpus, out):
    """Capacity factor 1.0 on a batch that sends most tokens to one expert: the dropped count of
    the metric and by hand, and the outputs against the experts computed by hand (kept gates
    renormalised, a token with no expert left gets zeros); then 6 training steps at capacity
    factor 1.0 from the zero-initialised gate (every token ties, so experts 0 and 1 take all)."""
    import numpy as np
    import tensorflow as tf

    from zoo.layers import SparseMoE
    from zoo.layers.expert_parallel import gather_shards
    from zoo.training import Callback, train

    R, E, K, D, N = strategy.num_replicas_in_sync, 4, 2, 8, 24
    rng = np.random.default_rng(1)
    with strategy.scope():
        layer = SparseMoE(E, K, hidden_units=8, noisy_gating=False, expert_parallel=True, capacity_factor=1.0)
        layer.build((None, D))
        gate = np.zeros((D, E), "float32")
        gate[0] = [3.0, 2.0, 0.5, -1.0]
        gate[1] = [0.0, 0.5, 1.0, 2.0]
        layer.gate_kernel.assign(gate)
    x = rng.normal(size=(R, N, D)).astype("float32")
    x[:, : int(0.8 * N), 0] = np.abs(x[:, : int(0.8 * N), 0]) + 1.0  # 80% of the tokens prefer expert 0
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(x[ctx.replica_id_in_sync_group]))

    @tf.function
    def call(values):
        return strategy.run(lambda v: layer(v, training=False), args=(values,))

    got = np.stack([t.numpy() for t in strategy.experimental_local_results(call(values))])
    w_in, b_in, w_out, b_out = gather_shards(strategy, [layer.expert_kernel_in, layer.expert_bias_in,
                                                         layer.expert_kernel_out, layer.expert_bias_out])
    capacity = int(np.ceil(1.0 * N * K / E))
    dropped, want = 0, np.zeros_like(got)
    for r in range(R):
        logits = x[r] @ gate
        top = np.argsort(-logits, axis=1, kind="stable")[:, :K]
        chosen = np.take_along_axis(logits, top, 1)
        gates = np.exp(chosen - chosen.max(1, keepdims=True))
        gates /= gates.sum(1, keepdims=True)
        used = np.zeros(E, int)
        for t in range(N):
            kept = []
            for j in range(K):
                e = top[t, j]
                if used[e] < capacity:
                    kept.append(j)
                else:
                    dropped += 1
                used[e] += 1
            if kept:
                scale = gates[t].sum() / gates[t, kept].sum()
                for j in kept:
                    e = top[t, j]
                    h = np.maximum(x[r, t] @ w_in[e] + b_in[e], 0)
                    want[r, t] += gates[t, j] * scale * (h @ w_out[e] + b_out[e])
    quiet = lambda m: None  # noqa: E731
    losses = []
    _, history = train("gcnn-moe-ptb", data=corpus, out_dir=os.path.join(out, "dropped-run"), strategy=strategy,
                       config=_config(steps=6, expert_parallel=True, capacity_factor=1.0),
                       overrides=MODELS["gcnn"][1], log=quiet,
                       callbacks=[Callback(on_step_end=lambda s, l: losses.append(l))])
    return {"metric": float(layer.dropped_tracker.result()), "by_hand": dropped, "capacity": capacity,
            "max_output_difference": float(np.max(np.abs(got - want))),
            "zero_rows": int(np.sum(np.all(want == 0, axis=-1))),
            "losses": losses, "trained_dropped": history[-1].get("moe_0_dropped") if history else None}


def main(mode, corpus, out, result_path=None, *models):
    import tensorflow as tf

    if mode.startswith("mirrored"):
        replicas = int(mode.split(":")[1])
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    import numpy as np

    import zoo
    from zoo.training import distribute
    from zoo.training import Callback, train

    quiet = lambda message: None  # noqa: E731
    if mode == "init":
        for name, (preset, overrides) in MODELS.items():
            train(preset, data=corpus, out_dir=os.path.join(out, f"{name}-init"), strategy="default",
                  config=_config(steps=1), overrides=overrides, log=quiet)
        return
    if mode.startswith("mirrored"):
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    else:
        strategy = distribute.get_strategy("multi_worker_mirrored")
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"] if "TF_CONFIG" in os.environ else 0
    result = {}
    if "errors" in models:
        result["errors"] = _errors(strategy, corpus, os.path.join(out, "errors"))
    if "dropped" in models:
        result["dropped"] = _dropped(strategy, corpus, out)
    models = [m for m in models if m in MODELS]
    if mode == "resume":
        run = os.path.join(out, "resume-" + os.path.basename(result_path).split(".")[0])
        if os.environ.get("ZOO_TEST_PAUSE_FILE"):  # slow down so the test can kill it mid-run
            pause = os.environ["ZOO_TEST_PAUSE_FILE"]

            def slow(step, loss):
                import time
                with open(pause, "a") as f:
                    f.write(f"{step}\n")
                time.sleep(0.3)
            callbacks = [Callback(on_step_end=slow)]
        else:
            callbacks = []
        train(os.path.join(out, "gcnn-init", "final"), data=corpus, out_dir=run, strategy=strategy,
              config=_config(steps=STEPS, checkpoint_every=1, expert_parallel=True, capacity_factor=float(EXPERTS)),
              log=quiet, callbacks=callbacks)
        if index == 0:  # the chief writes the presets
            final = zoo.load(os.path.join(run, "final"))
            result["weights"] = [w.tolist() for w in final.get_weights()]
    for name in models:
        start = os.path.join(out, f"{name}-init", "final")
        runs = {}
        for label, parallel in (("replicated", False), ("expert_parallel", True)):
            losses = []
            run = os.path.join(out, f"{name}-{mode.replace(':', '')}-{label}")
            model, history = train(start, data=corpus, out_dir=run, strategy=strategy,
                                   config=_config(steps=STEPS, expert_parallel=parallel,
                                                  capacity_factor=float(EXPERTS)),
                                   log=quiet, callbacks=[Callback(on_step_end=lambda s, l: losses.append(l))])
            runs[label] = {"losses": losses, "history": history, "final": os.path.join(run, "final"),
                           "bytes": _bytes_per_replica(model), "run": run}
        if index != 0:
            continue  # the chief writes the presets and the history
        a, b = (zoo.load(runs[k]["final"]) for k in ("replicated", "expert_parallel"))
        wa, wb = a.get_weights(), b.get_weights()
        ids = np.arange(1, 25, dtype="int32").reshape(2, 12) % a.vocabulary_size
        result[name] = {
            "losses": {k: v["losses"] for k, v in runs.items()},
            "dropped": [h.get("moe_0_dropped", h.get("moe_1_dropped")) for h in runs["expert_parallel"]["history"]],
            "history_keys": sorted(runs["expert_parallel"]["history"][-1]),
            "max_weight_difference": max(float(np.max(np.abs(x - y))) for x, y in zip(wa, wb)),
            "shapes_equal": [x.shape for x in wa] == [y.shape for y in wb],
            "max_output_difference": float(np.max(np.abs(np.asarray(a.log_probs(ids)) - np.asarray(b.log_probs(ids))))),
            "bytes": {k: v["bytes"] for k, v in runs.items()},
            "checkpoint_experts": _checkpoint_experts(runs["expert_parallel"]["run"], b),
        }
        if name == "gcnn":  # the unsharded preset exports as any other
            import tensorflow as tf

            from zoo.export import export_saved_model

            path = export_saved_model(b, os.path.join(out, f"exports-{mode.replace(':', '')}"), "ep")
            served = tf.saved_model.load(path).signatures["score_ids"](
                token_ids=tf.constant(ids), lengths=tf.constant([12, 12]))["token_log_probs"].numpy()
            result[name]["export_max_difference"] = float(np.max(np.abs(served - np.asarray(b.score(ids)))))
    if index == 0:
        with open(result_path, "w") as f:
            json.dump(result, f)
    elif result_path:
        with open(result_path + f".{index}", "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
