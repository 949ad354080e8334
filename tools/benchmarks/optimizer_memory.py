"""`zoo benchmark optimizer-memory`: optimiser state and step time for a large layer's experts.

How it measures: docs/benchmarks.md#optimizer-memory.
"""

import sys

import numpy as np

from zoo.tools.benchmarks import harness

FULL = {"experts": 256, "k": 4, "input_dim": 512, "hidden": 1024}
SMALL = {"experts": 16, "k": 4, "input_dim": 64, "hidden": 128}
LABELS = {"factorized_adam": "ours FactorizedAdam", "adam": "keras Adam", "adafactor": "keras Adafactor"}
OPTIMIZERS = tuple(LABELS)
SEED = 0


def _bytes(variable):
    import keras

    itemsize = np.dtype(keras.backend.standardize_dtype(variable.dtype)).itemsize
    return int(np.prod(variable.shape, dtype=np.int64)) * itemsize


def state_bytes(optimizer):
    """Bytes of `optimizer`'s variables but its iteration counter and learning-rate variable, and
    how many there are."""
    from zoo.factorized_adam import is_counter_variable

    state = [v for v in optimizer.variables if not is_counter_variable(optimizer, v)]
    return sum(map(_bytes, state)), len(state)


def make_optimizer(name):
    import keras

    from zoo.factorized_adam import FactorizedAdam

    classes = dict(factorized_adam=FactorizedAdam, adam=keras.optimizers.Adam, adafactor=keras.optimizers.Adafactor)
    if name not in classes:
        raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}.")
    return classes[name](learning_rate=1e-3)


def expert_variables(sizes, biases=False, seed=SEED):
    """The expert variables of a built `SparseMoE(experts, k, hidden)` on input `input_dim`."""
    import keras

    from zoo.layers.sparse_moe import SparseMoE

    keras.utils.set_random_seed(seed)
    layer = SparseMoE(sizes["experts"], sizes["k"], sizes["hidden"])
    layer.build((None, sizes["input_dim"]))
    biases = [layer.expert_bias_in, layer.expert_bias_out] if biases else []
    return layer, [layer.expert_kernel_in, layer.expert_kernel_out] + biases


def run_benchmark(sizes, optimizers=OPTIMIZERS, repeats=5, biases=False, seed=SEED, log=print):
    """Builds every optimiser on the same expert variables, counts its state and times its step.
    Returns {"variables": [(path, shape)], "params": n, "param_bytes": b, "results": {name: {...}}}."""
    import tensorflow as tf

    from zoo.factorized_adam import optimizer_state_bytes

    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}.")
    layer, variables = expert_variables(sizes, biases, seed)
    rng = np.random.default_rng(seed)
    # Fixed gradients, small enough that a few steps leave the weights sensible.
    gradients = [tf.constant(1e-3 * rng.standard_normal(tuple(v.shape), dtype=np.float32)) for v in variables]
    results, steps = {}, {}
    for name in optimizers:
        optimizer = make_optimizer(name)
        optimizer.build(variables)
        total, count = state_bytes(optimizer)
        results[name] = {"state_bytes": total, "state_variables": count}
        if name == "factorized_adam":
            results[name].update(helper_state_bytes=optimizer_state_bytes(optimizer),
                                 factored=[bool(optimizer.uses_factored_state(v)) for v in variables])
        update = tf.function(lambda grads, o=optimizer: o.apply_gradients(zip(grads, variables)))  # its iterations
        steps[name] = lambda update=update: int(update(gradients))  # int(): waits for it; the warm-up traces it
        log(f"  {LABELS[name]}: built, {total / 2**20:,.2f} MiB of state in {count} variables", flush=True)
    measured = harness.measure(steps, repeats)
    for name, r in results.items():
        r.update(harness.summary(measured[name]["times_s"], measured[name]["warmup_s"]))
    adam = results.get("adam")
    for r in results.values():
        r["bytes_vs_adam"] = r["state_bytes"] / adam["state_bytes"] if adam else None
        r["time_vs_adam"] = r["median_s"] / adam["median_s"] if adam else None
    return {"variables": [(v.path, list(v.shape)) for v in variables],
            "params": sum(int(np.prod(v.shape)) for v in variables), "param_bytes": sum(map(_bytes, variables)),
            "results": results}


def table(report):
    return harness.text_table(
        [("optimizer", -20), ("state vars", 10), ("state bytes", 15), ("MiB", 10), ("bytes/param", 11), ("vs Adam", 8),
         ("median s", 9), ("min s", 8), ("steps", 5), ("time vs Adam", 12)],
        [[LABELS[name], r["state_variables"], f"{r['state_bytes']:,d}", f"{r['state_bytes'] / 2**20:,.2f}",
          f"{r['state_bytes'] / report['params']:.4f}", harness.fmt(r["bytes_vs_adam"], ".3%"), f"{r['median_s']:.4f}",
          f"{r['min_s']:.4f}", len(r["times_s"]), harness.fmt(r["time_vs_adam"], ".2f") + "x"]
         for name, r in report["results"].items()])


def parse(argv):
    """The flags, the sizes they give and the optimisers."""
    p = harness.parser("optimizer-memory", __doc__, 5, "timed steps after 1 warm-up step (default 5)")
    for flag, what in (("experts", "number of experts"), ("input-dim", "input width"), ("hidden", "hidden width")):
        p.add_argument(f"--{flag}", type=int, help=f"{what} (default {FULL[flag.replace('-', '_')]})")
    p.add_argument("--small", action="store_true", help="smoke test: 16 experts, input 64, hidden 128")
    p.add_argument("--biases", action="store_true", help="also the expert biases [E, hidden] and [E, output]")
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS), help="subset of " + ",".join(OPTIMIZERS))
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (default 0: TensorFlow's choice)")
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    harness.at_least_one(args, "experts", "input_dim", "hidden")
    sizes = dict(SMALL if args.small else FULL)
    sizes.update({key: getattr(args, key) for key in ("experts", "input_dim", "hidden") if getattr(args, key)})
    sizes["k"] = min(sizes["k"], sizes["experts"])
    optimizers = tuple(o.strip() for o in args.optimizers.split(",") if o.strip())
    for name in optimizers:
        if name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}.")
    return args, sizes, optimizers


def main(argv):
    args, sizes, optimizers = parse(argv)
    out = harness.header("optimizer-memory", argv, sizes=sizes, biases=args.biases, repeats=args.repeats,
                         seed=args.seed)
    harness.cpu_tensorflow(args.threads)
    print(f"optimizer-memory: the expert {'variables' if args.biases else 'matrices'} of SparseMoE({sizes['experts']}, "
          f"{sizes['k']}, {sizes['hidden']}) on input {sizes['input_dim']}; 1 warm-up step, then {args.repeats} timed "
          f"steps, optimisers interleaved; seed {args.seed}")
    print(f"machine: {harness.machine_summary()}; {harness.versions()}; device CPU", flush=True)
    report = run_benchmark(sizes, optimizers, args.repeats, args.biases, args.seed)
    lines = ["", "variables: " + ", ".join(f"{path} {shape}" for path, shape in report["variables"])
             + f" = {report['params']:,} parameters, {report['param_bytes'] / 2**20:,.1f} MiB", table(report)]
    ours, adam = report["results"].get("factorized_adam"), report["results"].get("adam")
    if ours:
        agree = "agrees" if ours["helper_state_bytes"] == ours["state_bytes"] else "DISAGREES"
        lines += [f"zoo.factorized_adam.optimizer_state_bytes(FactorizedAdam) = {ours['helper_state_bytes']:,d} "
                  f"bytes ({agree})",
                  f"factored (row/column state): {sum(ours['factored'])} of {len(ours['factored'])} variables"]
    if ours and adam:
        lines.append(f"ours/Adam: state {ours['bytes_vs_adam']:.3%} (target <= 1%), step time "
                     f"{ours['time_vs_adam']:.2f}x (target <= 1.2x)")
    return harness.report(args, {**out, **report}, "\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
