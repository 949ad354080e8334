"""The runs `expert_parallel_test.py` compares, each in a fresh process (logical devices and the
collectives are configured when TensorFlow starts).

    python expert_parallel_worker.py init CORPUS OUT                   # one device: OUT/<model>-init
    python expert_parallel_worker.py mirrored:R CORPUS OUT RESULT.json [MODEL ...]
    python expert_parallel_worker.py worker CORPUS OUT RESULT.json [MODEL ...]   # TF_CONFIG set
    python expert_parallel_worker.py resume CORPUS OUT RESULT.json     # TF_CONFIG set; see below

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
                                            "clipnorm": 1.0}}),
    # an LSTM–MoE–LSTM stack (4 experts, k=2), the factorised Adam, another clip
    "stack": ("lstm-moe-ptb", {"embedding_dim": 8, "dropout": 0.0,
                               "layers": [{"type": "lstm", "units": 8},
                                          {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8,
                                           "noisy_gating": False},
                                          {"type": "lstm", "units": 8}],
                               "optimizer": {"name": "factorized_adam", "learning_rate": 0.01,
                                             "clipnorm": 0.5}}),
}
EXPERTS = 4


def _config(**kw):
    from zoo.training import TrainConfig

    return TrainConfig(global_batch_size=GLOBAL_BATCH, seq_len=SEQ_LEN, seed=3, tokenizer="word", **kw)


def main(mode, corpus, out, result_path=None, *models):
    import tensorflow as tf

    if mode.startswith("mirrored"):
        replicas = int(mode.split(":")[1])
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    import numpy as np

    import zoo
    from zoo import distribute
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
    if mode == "resume":
        run = os.path.join(out, "resume")
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
        final = zoo.load(os.path.join(run, "final"))
        result["weights"] = [w.tolist() for w in final.get_weights()]
    for name in models:
        start = os.path.join(out, f"{name}-init", "final")
        runs = {}
        for label, parallel in (("replicated", False), ("expert_parallel", True)):
            losses = []
            run = os.path.join(out, f"{name}-{mode.replace(':', '')}-{label}")
            _, history = train(start, data=corpus, out_dir=run, strategy=strategy,
                               config=_config(steps=STEPS, expert_parallel=parallel, capacity_factor=float(EXPERTS)),
                               log=quiet, callbacks=[Callback(on_step_end=lambda s, l: losses.append(l))])
            runs[label] = {"losses": losses, "history": history, "final": os.path.join(run, "final")}
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
        }
    if index == 0:
        with open(result_path, "w") as f:
            json.dump(result, f)
    elif result_path:
        with open(result_path + f".{index}", "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
