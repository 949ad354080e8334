"""`zoo benchmark moe-cost`: the cost of sparsity, a mixture of experts against its dense twin of
the same computation per token (default: gcnn-moe-en and gcnn-wide-en), side by side in one
process, their repeats interleaved.

How it measures: docs/benchmarks.md#moe-cost.
"""

import json
import statistics

import numpy as np

from zoo.tools.benchmarks import harness

# what a traced op belongs to: (label, marks anywhere in its name, marks its first name scope starts with)
GROUPS = (("mixture of experts (gate, dispatch, experts; forward and backward)", ("moe_",), ()),
          ("optimiser update", (), ("adam", "factorized_adam", "sgd")),
          ("convolution blocks (forward and backward)", ("block_",), ()))


def _group(operation):
    first = operation.split("/")[0]
    return next((label for label, inside, starts in GROUPS if any(m in operation for m in inside)
                 or first.startswith(starts)), "the rest (output layer, loss, clipping)")


def _model(preset, seed):
    """`(model, trained)`: the preset with its trained weights where they ship, else random ones with
    random gates (at zero they would send every token to the same experts)."""
    import keras

    import zoo
    import zoo.weights

    keras.utils.set_random_seed(seed)
    trained = preset in zoo.weights.TRAINED
    model = zoo.load(preset, weights="trained" if trained else "random")
    rng = np.random.default_rng(seed)
    for layer in [] if trained else getattr(model, "moe_layers", []):
        layer.gate_kernel.assign(rng.normal(scale=0.5, size=layer.gate_kernel.shape))
    return model, trained


def _step(model, optimizer_spec, batches):
    """`zoo train`'s step of `model` with the optimiser `optimizer_spec` on `batches`, traced and warmed
    up: a function of `steps`, their seconds a step."""
    import tensorflow as tf

    from zoo import optimizers
    from zoo.training.steps import step_functions

    strategy = tf.distribute.get_strategy()
    train = step_functions(model, optimizers.from_config(optimizer_spec), strategy).train
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(batches).repeat()))
    for _ in range(3):  # trace and warm up
        train(iterator)
    return lambda steps: harness.timed(lambda: [float(train(iterator)) for _ in range(steps)][-1])[0] / steps


def _generation(model, batch, tokens, jit_compile):
    """Greedy generation of `tokens` tokens after `batch` 8-token prompts, traced: a call, tokens a second."""
    prompts = [[4 + (7 * i + j) % 500 for j in range(8)] for i in range(batch)]

    def rate():
        return batch * tokens / harness.timed(model.generate, prompts, max_new_tokens=tokens, sampler="greedy",
                                              stop=None, jit_compile=jit_compile)[0]

    rate()  # trace
    return rate


def profile_step(timed, logdir):
    """Self-time shares of a few training steps (idle time left out), by what each op belongs to
    (`GROUPS`) and by op type."""
    _, rows = harness.profiled(lambda: timed(5), logdir)
    return {"groups": {g: share for g, _, share in harness.self_time_shares(rows, lambda r: _group(r["operation"]))},
            "top_op_types": [(t, share) for t, _, share in harness.self_time_shares(rows, top=10)]}


def main(argv):
    p = harness.parser("moe-cost", __doc__, 5)
    p.add_argument("--moe", default="gcnn-moe-en")
    p.add_argument("--dense", default="gcnn-wide-en")
    p.add_argument("--steps", type=int, default=10, help="training steps a repeat")
    p.add_argument("--tokens", type=int, default=32, help="new tokens a generation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", metavar="DIR", help="trace the mixture's training step with tf.profiler into DIR")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats", "steps", "tokens")
    command = harness.command("moe-cost", argv)
    machine = harness.machine_summary()  # its load average before the runs, not after them
    print(f"command: {command}\n{machine}", flush=True)
    (moe, moe_trained), (dense, dense_trained) = _model(args.moe, args.seed), _model(args.dense, args.seed)
    ids = np.random.default_rng(args.seed).integers(4, moe.vocabulary_size, size=(4, 32, 65)).astype("int32")
    batches = (ids[:, :, :-1], ids[:, :, 1:], np.ones((4, 32, 64), "float32"))
    moe_spec = moe.get_config()["optimizer"] or {"name": "adam"}  # the preset's own
    timers = {"dense": _step(dense, dense.get_config()["optimizer"] or {"name": "adam"}, batches),
              "moe, Adam": _step(moe, moe_spec, batches),
              "moe, FactorizedAdam for the experts": _step(_model(args.moe, args.seed)[0],
                                                           dict(moe_spec, name="factorized_adam"), batches)}
    generation = {f"{side}, batch {b}, {mode}": _generation(model, b, args.tokens, mode == "XLA") for b in (1, 32)
                  for side, model, mode in (("dense", dense, "graph"), ("moe", moe, "graph"), ("dense", dense, "XLA"))}
    runs = harness.interleaved({**{k: (lambda t=t: t(args.steps)) for k, t in timers.items()}, **generation},
                               args.repeats)
    step, rate = ({k: statistics.median(runs[k]) for k in side} for side in (timers, generation))
    out = {"command": command, "machine": machine, "load_average_after": harness.load_average(),
           "weights": {k: "trained" if t else "random" for k, t in (("moe", moe_trained), ("dense", dense_trained))},
           "train_step_seconds": step, "train_step_ratio": {k: v / step["dense"] for k, v in step.items()},
           "generate_tokens_per_second": rate,
           "generate_ratio": {f"batch {b}, graph": rate[f"moe, batch {b}, graph"] / rate[f"dense, batch {b}, graph"]
                              for b in (1, 32)}}
    table = "\n".join(["", harness.markdown_table(
        ["training step (32 × 64 tokens)", "ms:", "÷ dense:"],
        [[k, f"{v * 1e3:.1f}", f"{v / step['dense']:.2f}×"] for k, v in step.items()]), "", harness.markdown_table(
        ["generation, greedy", "tokens/s:", "mixture ÷ dense (graph):"],
        [[k, f"{v:,.0f}", "" if k.startswith("dense") else f"{v / rate['dense' + k[len('moe'):]]:.2f}×"]
         for k, v in rate.items()])])
    if args.profile:
        profile = out["profile"] = profile_step(timers["moe, Adam"], args.profile)
        table += "\n\nprofile of the mixture's training step (op self-time shares):\n" + json.dumps(profile, indent=1)
    return harness.report(args, out, table)
