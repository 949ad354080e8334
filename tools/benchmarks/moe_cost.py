"""`zoo benchmark moe-cost`: the cost of sparsity, a mixture of experts against its dense twin of
the same computation per token (default: gcnn-moe-en and gcnn-wide-en), side by side in one
process, their repeats interleaved.

Measured, each a median over `--repeats`:

- the training step: `zoo train`'s own step (`zoo.training.steps`: forward, backward, global-norm
  clipping and the optimiser's update of every variable, every expert included) on batches of
  32 × 64 tokens, seconds a step; the mixture with its preset's Adam and with the factorised Adam
  of Appendix D for its experts;
- generation: greedy, `--tokens` new tokens after an 8-token prompt, 1 and 32 prompts, tokens a
  second, in the graph loop (`jit_compile=False`) for both; the dense twin also with XLA, where
  the mixture cannot go (its dispatch has data-dependent shapes).

Both models have their trained weights where they ship, else random ones with random gates (gates
at their zero initialisation would send every token to the same two experts). `--profile DIR`
traces a few training steps of the mixture with tf.profiler and prints the self-time shares of
the mixture (gate, dispatch and experts), the optimiser's update, the convolutions and the rest.
"""

import argparse
import json
import shlex
import statistics
import time

import numpy as np

from zoo.tools.benchmarks.common import at_least_one, machine_summary, write_results

# what a traced op belongs to, from its name scope
GROUPS = (("mixture of experts (gate, dispatch, experts; forward and backward)", ("moe_",)),
          ("optimiser update", ("adam", "factorized_adam", "sgd")),
          ("convolution blocks (forward and backward)", ("block_",)))


def _group(operation):
    for label, marks in GROUPS:
        first = operation.split("/")[0]
        if any(m in operation for m in marks) if label != "optimiser update" else first.startswith(marks):
            return label
    return "the rest (output layer, loss, clipping)"


def _model(preset, seed):
    import keras

    import zoo
    import zoo.weights

    keras.utils.set_random_seed(seed)
    trained = preset in zoo.weights.TRAINED
    model = zoo.load(preset, weights="trained" if trained else "random")
    if not trained:
        rng = np.random.default_rng(seed)
        for layer in getattr(model, "moe_layers", []):
            layer.gate_kernel.assign(rng.normal(scale=0.5, size=layer.gate_kernel.shape))
    return model, trained


def _step(model, optimizer_spec, batches):
    import tensorflow as tf

    from zoo import optimizers
    from zoo.training.steps import step_functions

    strategy = tf.distribute.get_strategy()
    optimizer = optimizers.from_config(optimizer_spec)
    train = step_functions(model, optimizer, strategy).train
    dataset = tf.data.Dataset.from_tensor_slices(batches).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    for _ in range(3):  # trace and warm up
        train(iterator)

    def timed(steps):
        start = time.perf_counter()
        for _ in range(steps):
            loss = train(iterator)
        float(loss)
        return (time.perf_counter() - start) / steps

    return timed


def _generation(model, batch, tokens, jit_compile):
    prompts = [[4 + (7 * i + j) % 500 for j in range(8)] for i in range(batch)]

    def timed():
        start = time.perf_counter()
        model.generate(prompts, max_new_tokens=tokens, sampler="greedy", stop=None, jit_compile=jit_compile)
        return batch * tokens / (time.perf_counter() - start)

    timed()  # trace
    return timed


def profile_step(timed, logdir):
    """Self-time shares of a few training steps (idle time left out), by what each op belongs to
    (`GROUPS`) and by op type."""
    import tensorflow as tf

    from zoo.compat import framework_op_stats

    tf.profiler.experimental.start(logdir)
    timed(5)
    tf.profiler.experimental.stop()
    rows = [r for r in framework_op_stats(logdir) if r["type"] != "IDLE"]
    total = sum(float(r["total_self_time"] or 0) for r in rows) or 1.0
    groups, by_type = {}, {}
    for row in rows:
        t = float(row["total_self_time"] or 0) / total
        groups[_group(row["operation"])] = groups.get(_group(row["operation"]), 0.0) + t
        by_type[row["type"]] = by_type.get(row["type"], 0.0) + t
    return {"groups": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
            "top_op_types": sorted(by_type.items(), key=lambda kv: -kv[1])[:10]}


def main(argv):
    p = argparse.ArgumentParser(prog="zoo benchmark moe-cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--moe", default="gcnn-moe-en")
    p.add_argument("--dense", default="gcnn-wide-en")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="training steps a repeat")
    p.add_argument("--tokens", type=int, default=32, help="new tokens a generation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", metavar="DIR", help="trace the mixture's training step with tf.profiler into DIR")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    at_least_one(args, "repeats", "steps", "tokens")
    print("command: zoo benchmark moe-cost " + " ".join(shlex.quote(a) for a in argv), flush=True)
    print(machine_summary(), flush=True)

    moe, moe_trained = _model(args.moe, args.seed)
    dense, dense_trained = _model(args.dense, args.seed)
    rng = np.random.default_rng(args.seed)
    ids = rng.integers(4, moe.vocabulary_size, size=(4, 32, 65)).astype("int32")
    batches = (ids[:, :, :-1], ids[:, :, 1:], np.ones((4, 32, 64), "float32"))
    moe_spec = moe.get_config()["optimizer"] or {"name": "adam"}  # the preset's own
    factorized = dict(moe_spec, name="factorized_adam")
    timers = {"dense": _step(dense, dense.get_config()["optimizer"] or {"name": "adam"}, batches),
              "moe, Adam": _step(moe, moe_spec, batches)}
    moe_factored, _ = _model(args.moe, args.seed)
    timers["moe, FactorizedAdam for the experts"] = _step(moe_factored, factorized, batches)
    generation = {}
    for batch in (1, 32):
        generation[f"dense, batch {batch}, graph"] = _generation(dense, batch, args.tokens, False)
        generation[f"moe, batch {batch}, graph"] = _generation(moe, batch, args.tokens, False)
        generation[f"dense, batch {batch}, XLA"] = _generation(dense, batch, args.tokens, True)
    step_times = {k: [] for k in timers}
    rates = {k: [] for k in generation}
    for r in range(args.repeats):
        for name, timed in timers.items():
            step_times[name].append(timed(args.steps))
        for name, timed in generation.items():
            rates[name].append(timed())
        print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1] * 1e3:.0f} ms" for k, v in step_times.items()),
              flush=True)
    step = {k: statistics.median(v) for k, v in step_times.items()}
    rate = {k: statistics.median(v) for k, v in rates.items()}
    out = {"command": "zoo benchmark moe-cost " + " ".join(argv), "machine": machine_summary(),
           "weights": {"moe": "trained" if moe_trained else "random", "dense": "trained" if dense_trained else "random"},
           "train_step_seconds": step, "train_step_ratio": {k: v / step["dense"] for k, v in step.items()},
           "generate_tokens_per_second": rate,
           "generate_ratio": {f"batch {b}, graph": rate[f"moe, batch {b}, graph"] / rate[f"dense, batch {b}, graph"]
                              for b in (1, 32)}}
    print("\n| training step (32 × 64 tokens) | ms | ÷ dense |\n| --- | ---: | ---: |")
    for k, v in step.items():
        print(f"| {k} | {v * 1e3:.1f} | {v / step['dense']:.2f}× |")
    print("\n| generation, greedy | tokens/s | mixture ÷ dense (graph) |\n| --- | ---: | ---: |")
    for k, v in rate.items():
        ratio = "" if k.startswith("dense") else f"{v / rate['dense' + k[len('moe'):]]:.2f}×"
        print(f"| {k} | {v:,.0f} | {ratio} |")
    if args.profile:
        out["profile"] = profile_step(timers["moe, Adam"], args.profile)
        print("\nprofile of the mixture's training step (op self-time shares):")
        print(json.dumps(out["profile"], indent=1))
    if args.json:
        write_results(args.json, out)
    return out
