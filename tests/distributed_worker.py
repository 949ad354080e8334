"""The training runs `distributed_test.py` compares, each in a fresh process (logical devices and
multi-worker collectives are configured when TensorFlow starts).

    python distributed_worker.py MODE CORPUS OUT RESULT.json [MODEL ...]

MODE is `single` (the default strategy), `mirrored` (one device, then MirroredStrategy over two
logical CPUs, in this one process) or `worker` (MultiWorkerMirroredStrategy from TF_CONFIG).
Each MODEL (`gcnn`, `moe`) is trained for `STEPS` steps; RESULT.json gets, per run, the loss of
every step and the final weights.
"""

import json
import os
import sys

STEPS = 20
GLOBAL_BATCH = 8
SEQ_LEN = 12

MODELS = {
    # A GCNN with a bottleneck block and an adaptive softmax.
    "gcnn": ("gcnn-ptb", {"embedding_dim": 8, "blocks": [[[3, 16]], [[1, 4], [3, 4], [1, 16]]],
                          "cutoffs": [10, 30], "dropout": 0.0}),
    # The same with a sparse MoE (4 experts, k = 2) after its first block, trained with the
    # factorised Adam of Appendix D; no gating noise, whose draws depend on how the batch is
    # split (the balancing losses stay on).
    "moe": ("gcnn-moe-ptb", {"embedding_dim": 8, "blocks": [[[3, 16]], [[3, 16]]], "dropout": 0.0,
                             "cutoffs": [10, 30],
                             "moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8,
                                     "noisy_gating": False},
                             "optimizer": {"name": "factorized_adam", "learning_rate": 0.01,
                                           "global_clipnorm": 1.0}}),
}


def main(mode, corpus, out, result_path, *models):
    import tensorflow as tf

    if mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from zoo.training import distribute
    from zoo.training import Callback, TrainConfig, train

    if mode == "worker":
        strategies = {"worker": distribute.get_strategy("multi_worker_mirrored")}
    elif mode == "mirrored":
        strategies = {"single": "default",
                      "mirrored": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])}
    else:
        strategies = {"single": "default"}
    result = {}
    for name in models:
        preset, overrides = MODELS[name]
        for label, strategy in strategies.items():
            losses = []
            model, _ = train(preset, data=corpus, out_dir=os.path.join(out, f"{name}-{label}"),
                             strategy=strategy,
                             config=TrainConfig(global_batch_size=GLOBAL_BATCH, seq_len=SEQ_LEN, steps=STEPS, seed=3,
                                                tokenizer="word"),
                             overrides=overrides, log=lambda m: None,
                             callbacks=[Callback(on_step_end=lambda s, l: losses.append(l))])
            result[f"{name}-{label}"] = {"losses": losses,
                                         "weights": [w.tolist() for w in model.get_weights()]}
    if mode == "mirrored":  # a global batch the replicas cannot share evenly is refused
        try:
            train("gcnn-ptb", data=corpus, out_dir=os.path.join(out, "odd"), strategy=strategies["mirrored"],
                  config=TrainConfig(global_batch_size=7, steps=1, tokenizer="word"), log=lambda m: None)
            result["batch_error"] = None
        except ValueError as e:
            result["batch_error"] = str(e)
    if mode == "worker":  # fit must refuse at once, pointing to `zoo train`
        try:
            model.fit(tf.data.Dataset.from_tensors((tf.zeros((2, 4), tf.int32),) * 2), verbose=0)
            result["fit_error"] = None
        except RuntimeError as e:
            result["fit_error"] = str(e)
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
