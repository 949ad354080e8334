"""The benchmarks of one sparse mixture-of-experts layer: `zoo benchmark moe` (`main`, step time as the
number of experts grows) and `optimizer-memory` (`optimizer_memory`, the optimiser state and update
time of its experts). How each measures: docs/benchmarks.md#moe, #optimizer-memory.
"""

import gc

import numpy as np

from zoo.tools.benchmarks import harness

FULL = {"tokens": 8192, "input_dim": 512, "hidden": 1024, "k": 4, "group_size": 512}
SMALL = {"tokens": 512, "input_dim": 64, "hidden": 128, "k": 4, "group_size": 128}
HELP = {"tokens": "tokens per step", "input_dim": "input (= output) width", "hidden": "each expert's hidden width",
        "k": "experts per token", "group_size": "MoeLayer tokens per routing group"}
MODELS = ("ours", "dense", "official")
LABELS = {"ours": "ours SparseMoE", "dense": "dense reference", "official": "tf-models MoeLayer"}
SEED = 0
# optimizer-memory's sizes, k = 4 (at most the experts)
MEMORY_FULL = {"experts": 256, "input_dim": 512, "hidden": 1024}
MEMORY_SMALL = {"experts": 16, "input_dim": 64, "hidden": 128}
MEMORY_HELP = {"experts": "number of experts", "input_dim": "input width", "hidden": "hidden width"}
OPTIMIZER_LABELS = {"factorized_adam": "ours FactorizedAdam", "adam": "keras Adam", "adafactor": "keras Adafactor"}
OPTIMIZERS = tuple(OPTIMIZER_LABELS)


def sparse_moe(experts, k, hidden, input_dim, seed=SEED):
    """A `SparseMoE(experts, k, hidden)` built on input `input_dim`, its weights drawn after `set_random_seed(seed)`."""
    import keras

    from zoo.layers.sparse_moe import SparseMoE

    keras.utils.set_random_seed(seed)
    layer = SparseMoE(experts, k, hidden)
    layer.build((None, input_dim))
    return layer


# ---- the dense reference ----------------------------------------------------------------------
def all_experts(layer, x):
    """[tokens, E, output]: every expert of a built `SparseMoE` (flat or hierarchical: expert
    (i, j) of a hierarchical layer is i · experts per group + j) on every token of `x` [tokens, d]."""
    from keras import ops

    flat = ops.cast(ops.reshape(x, (-1, layer.input_dim)), layer.compute_dtype)
    w_in, b_in, w_out, b_out = (ops.cast(getattr(layer, f"expert_{name}"), layer.compute_dtype)
                                for name in ("kernel_in", "bias_in", "kernel_out", "bias_out"))
    hidden = ops.relu(ops.einsum("nd,edh->neh", flat, w_in) + b_in)
    return ops.einsum("neh,eho->neo", hidden, w_out) + b_out


def dense_reference(layer, x, training=False, noise=None):
    """`Σ_i G(x)_i E_i(x)` with every expert on every token, by the weights and gate of `layer` (a
    built flat `SparseMoE`): what `layer(x)` returns in eval mode (or with the same `noise`), and
    the importance and load losses it adds when training: `(outputs, auxiliary_loss)`."""
    import tensorflow as tf
    from keras import ops

    from zoo.layers.sparse_moe import cv_squared

    if layer.groups:
        raise ValueError("dense_reference is written for a flat SparseMoE (groups=None).")
    flat = ops.cast(ops.reshape(x, (-1, layer.input_dim)), layer.compute_dtype)
    routing = layer.route(flat, training, noise)
    n, experts = ops.shape(flat)[0], layer.num_experts
    index = routing["token_ids"] * experts + routing["expert_ids"]  # the [tokens, E] gates, 0 off a token's k
    gates = tf.math.unsorted_segment_sum(routing["gates"], index, n * experts)
    gates = ops.cast(ops.reshape(gates, (-1, experts)), layer.compute_dtype)
    mixed = ops.einsum("ne,neo->no", gates, all_experts(layer, flat))
    auxiliary = ops.zeros((), "float32")
    for weight, statistic in ((layer.importance_weight, "importance"), (layer.load_weight, "load")):
        if training and weight:
            auxiliary += ops.cast(weight * cv_squared(routing[statistic]), "float32")
    return ops.reshape(mixed, tuple(ops.shape(x)[:-1]) + (layer.output_dim,)), auxiliary


# ---- cost model (for the table and the skip estimates) ------------------------------------------
def forward_gflop(model, tokens, input_dim, hidden, experts, k, group_size):
    """2 × the forward multiply-adds of the gate matmuls (ours and the dense reference: clean and
    noise logits, `2 · d · E` per token; MoeLayer's router: `d · E`), the expert matmuls, and for
    MoeLayer its dispatch and combine einsums. A training step is about 3 times this."""
    official = model == "official"
    experts_macs = tokens * (experts if model == "dense" else k) * 2 * input_dim * hidden
    gate_macs = (1 if official else 2) * tokens * input_dim * experts
    dispatch_macs = 2 * tokens * k * group_size * input_dim if official else 0
    return 2 * (experts_macs + gate_macs + dispatch_macs) / 1e9


def estimate_step_s(measured, experts, cost):
    """Step time at `experts` from {E: median s} measured at smaller E: the median at the largest
    such E scaled by the ratio of `cost(E)` (the modelled FLOPs); None when nothing was measured."""
    smaller = [e for e, t in measured.items() if t is not None and e < experts]
    return measured[max(smaller)] * cost(experts) / cost(max(smaller)) if smaller else None


def skip_reason(model, experts, measured, sizes, max_step_s, available_bytes=None):
    """None to run `model` at `experts` (ours always runs), else {"skipped": why, "estimate_s": …,
    "fwd_gflop": …}; `measured` holds the model's own medians {E: s} so far."""
    if model == "ours":
        return None
    estimate = estimate_step_s(measured, experts, lambda e: forward_gflop(model, experts=e, **sizes))
    # the dense reference's [tokens, E, ·] tensors: hidden and outputs, the ReLU's input, their gradients
    need = 4 * sizes["tokens"] * experts * (sizes["hidden"] + sizes["input_dim"]) * 3
    reason = None
    if estimate is not None and estimate > max_step_s:
        reason = f"est. {estimate:.0f} s/step > --max-step-s {max_step_s:g}"
    elif model == "dense" and available_bytes is not None and need > 0.6 * available_bytes:
        reason = (f"needs ~{need / 2**30:.1f} GiB of activations, {available_bytes / 2**30:.1f} GiB available"
                  + (f"; est. {estimate:.0f} s/step" if estimate is not None else ""))
    elif model == "official" and round(sizes["k"] * sizes["group_size"] / experts) < 1:
        reason = f"capacity round(k·group/E) = 0 (group {sizes['group_size']}, E {experts})"
    return reason and {"skipped": reason, "estimate_s": estimate,
                       "fwd_gflop": forward_gflop(model, experts=experts, **sizes)}


# ---- the steps ----------------------------------------------------------------------------------
def training_step(layer, variables, forward=None):
    """A `tf.function` of the input: the loss `mean(output²) + auxiliary losses` and its gradients
    w.r.t. `variables` and the input; `forward(inputs)` gives `(outputs, auxiliary)`, by default
    `layer`'s training call and the losses it adds."""
    import tensorflow as tf

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs, auxiliary = forward(inputs) if forward else (layer(inputs, training=True), sum(layer.losses))
            loss = tf.reduce_mean(tf.square(outputs)) + auxiliary
        return loss, tape.gradient(loss, variables + [inputs])

    return step


def _make_models(models, experts, sizes, seed):
    """{model: (step function, argument, parameter count)} for one number of experts; MoeLayer is
    tf-models-official's (expert choice, capacity factor k)."""
    import tensorflow as tf

    tokens, d, group = sizes["tokens"], sizes["input_dim"], sizes["group_size"]
    x = np.random.default_rng(seed).standard_normal((tokens, d), dtype=np.float32)
    built = {}
    if "ours" in models or "dense" in models:
        layer = sparse_moe(experts, sizes["k"], sizes["hidden"], d, seed)
        variables = list(layer.trainable_variables)
        dense = lambda inputs: dense_reference(layer, inputs, training=True)  # noqa: E731
        for model, forward in (("ours", None), ("dense", dense)):
            if model in models:
                built[model] = (training_step(layer, variables, forward), tf.constant(x), int(layer.count_params()))
    if "official" in models:
        from zoo.tools.cli.workshop import dependency

        dependency("official", "zoo benchmark moe --models official")  # one sentence if tf-models-official is missing
        import tf_keras  # comes with tf-models-official
        from official.nlp.modeling.layers import ExpertsChooseMaskedRouter, FeedForwardExperts, MoeLayer

        tf_keras.utils.set_random_seed(seed)
        moe = MoeLayer(FeedForwardExperts(experts, sizes["hidden"], activation=tf_keras.activations.relu),
                       ExpertsChooseMaskedRouter(experts), train_capacity_factor=float(sizes["k"]),
                       eval_capacity_factor=float(sizes["k"]), examples_per_group=1.0)
        grouped_x = tf.constant(x.reshape(tokens // group, group, d))
        moe(grouped_x[:1], training=False)  # builds the weights
        built["official"] = (training_step(moe, list(moe.trainable_variables)), grouped_x, int(moe.count_params()))
    return built


def check_sizes(sizes, experts_list=(), repeats=1):
    """A ValueError in one sentence for a size or `repeats` below 1, a MoeLayer group (where `sizes` has one)
    that does not divide the tokens, or fewer experts than k."""
    for key, value in {**sizes, "repeats": repeats}.items():
        if value < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {value}.")
    if "group_size" in sizes and sizes["tokens"] % sizes["group_size"]:
        raise ValueError(f"--group-size {sizes['group_size']} must divide --tokens {sizes['tokens']} "
                         "(MoeLayer routes within groups of that many tokens).")
    for experts in experts_list:
        if experts < sizes["k"]:
            raise ValueError(f"every number of experts must be >= k = {sizes['k']}, got {experts}.")


def run_benchmark(sizes, experts_list, models=MODELS, repeats=3, max_step_s=120.0, seed=SEED, log=print):
    """Times every (E, model) configuration; returns {"configs": {E: {model: result}}, ...}, a result
    {"median_s", "min_s", "times_s", "warmup_s", "loss", "params", "fwd_gflop"} or {"skipped": reason, …}."""
    check_sizes(sizes, experts_list, repeats)
    medians, configs = {m: {} for m in models}, {}
    for experts in sorted(experts_list):
        try:
            available = harness.proc_kib("MemAvailable", "/proc/meminfo") * 1024
        except (OSError, RuntimeError):
            available = None
        results = configs[experts] = {m: skip_reason(m, experts, medians[m], sizes, max_step_s, available)
                                      for m in models}
        running = [m for m in models if results[m] is None]
        log(f"E = {experts}: building {', '.join(LABELS[m] for m in running) or 'nothing'}"
            + "".join(f"; {LABELS[m]} skipped ({r['skipped']})" for m, r in results.items() if r), flush=True)
        built = _make_models(running, experts, sizes, seed)
        # float(loss): on the CPU the step has finished once its outputs exist; the warm-up traces it
        steps = {m: (lambda s=step, x=x: float(s(x)[0])) for m, (step, x, _) in built.items()}
        for model, r in harness.measure(steps, repeats).items():
            results[model] = {"params": built[model][2], **harness.summary(r["times_s"], r["warmup_s"]),
                              "loss": r["result"], "fwd_gflop": forward_gflop(model, experts=experts, **sizes)}
            medians[model][experts] = r["median_s"]
            log(f"  {LABELS[model]}: median {r['median_s']:.3f} s over {repeats} steps", flush=True)
        del built
        gc.collect()  # frees this E's weights before the next, larger one
    ours, lo, hi = medians.get("ours", {}), min(experts_list), max(experts_list)
    ratio = ours[hi] / ours[lo] if lo in ours and hi in ours and hi != lo else None
    return {"configs": configs, "ours_ratio": ratio, "ratio_experts": (lo, hi)}


# ---- command line ---------------------------------------------------------------------------------
def parse_sized(p, argv, full, small, helps=None):
    """The arguments `argv` parsed by `p` given an int flag for each size of `full` (`-k` for k; `helps` says
    what it is), `--small` (the sizes of `small`), `--threads` and `--seed`; `(args, sizes)`."""
    for key in full:
        p.add_argument({"k": "-k"}.get(key, f"--{key.replace('_', '-')}"), dest=key, type=int,
                       help=(f"{helps[key]} " if helps else "") + f"(default {full[key]}; --small {small[key]})")
    p.add_argument("--small", action="store_true", help="smoke test sizes (explicit size flags still win)")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (default 0: TensorFlow's choice)")
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    return args, {key: (small if args.small else full)[key] if getattr(args, key) is None else getattr(args, key)
                  for key in full}


def listed(text, kind=str):
    """The items of a comma-separated flag value, each `kind(item)`; empty items left out."""
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def main(argv):
    p = harness.parser("moe", __doc__, 3, "timed steps after 1 warm-up step (default 3)")
    p.add_argument("--experts", default="4,32,256", help="numbers of experts, comma-separated (default 4,32,256)")
    p.add_argument("--max-step-s", type=float, default=120.0,
                   help="skip a dense/MoeLayer configuration whose estimated step time exceeds this (default 120)")
    p.add_argument("--models", default=",".join(MODELS), help="subset of ours,dense,official")
    args, sizes = parse_sized(p, argv, FULL, SMALL, HELP)
    sizes["group_size"] = min(sizes["group_size"], sizes["tokens"])
    experts_list, models = listed(args.experts, int), tuple(listed(args.models))
    if set(models) - set(MODELS):
        raise ValueError(f"unknown models {[m for m in models if m not in MODELS]}; choose from {', '.join(MODELS)}.")
    check_sizes(sizes, experts_list, args.repeats)
    out = harness.header("moe", argv, sizes=sizes, experts=experts_list, repeats=args.repeats,
                         max_step_s=args.max_step_s, seed=args.seed)
    tf = harness.cpu_tensorflow(args.threads)
    print(f"moe: one training step of {sizes['tokens']} tokens, input = output {sizes['input_dim']}, expert hidden "
          f"{sizes['hidden']}, k = {sizes['k']}; MoeLayer groups of {sizes['group_size']} tokens; seed {args.seed}; "
          f"1 warm-up step, then {args.repeats} timed steps, models interleaved")
    print(f"machine: {harness.machine_summary()}; TF intra-op threads "
          f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}; {harness.versions()}; device CPU",
          flush=True)
    report = run_benchmark(sizes, experts_list, models, args.repeats, args.max_step_s, args.seed)
    rows = []
    for experts, results in report["configs"].items():
        ours = results.get("ours", {}).get("median_s")
        rows += [[experts if i == 0 else "", LABELS[model], *(
            ["", f"{r['fwd_gflop']:.2f}", f"skipped ({r['skipped']})"] if "skipped" in r else
            [f"{r['params']:,d}", f"{r['fwd_gflop']:.2f}", f"{r['median_s']:.3f}", f"{r['min_s']:.3f}",
             len(r["times_s"]), f"{r['median_s'] / ours:.2f}x" if ours else "-"])]
                 for i, (model, r) in enumerate(results.items())]
    (lo, hi), ratio = report["ratio_experts"], report["ours_ratio"]
    table = harness.text_table([("experts", 7), ("model", -20), ("params", 12), ("fwd GFLOP", 9), ("median s", 9),
                                ("min s", 8), ("steps", 5), ("vs ours", 8)], rows)
    text = f"\n{table}\n" + (f"ours t({hi})/t({lo}) = {ratio:.2f} (target <= 1.5)\n" if ratio else "")
    return harness.report(args, {**out, "configs": {str(e): r for e, r in report["configs"].items()},
                                 "ours_ratio": ratio, "ratio_experts": [lo, hi]},
                          text + "What each column means: docs/benchmarks.md#moe")


# ---- optimizer-memory: the optimiser state of the experts -------------------------------------------
def make_optimizer(name):
    import keras

    from zoo.factorized_adam import FactorizedAdam

    classes = dict(factorized_adam=FactorizedAdam, adam=keras.optimizers.Adam, adafactor=keras.optimizers.Adafactor)
    if name not in classes:
        raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}.")
    return classes[name](learning_rate=1e-3)


def expert_variables(sizes, biases=False, seed=SEED):
    """The expert variables of a built `SparseMoE(experts, k, hidden)` on input `input_dim`."""
    layer = sparse_moe(sizes["experts"], sizes["k"], sizes["hidden"], sizes["input_dim"], seed)
    biases = [layer.expert_bias_in, layer.expert_bias_out] if biases else []
    return layer, [layer.expert_kernel_in, layer.expert_kernel_out] + biases


def memory_benchmark(sizes, optimizers=OPTIMIZERS, repeats=5, biases=False, seed=SEED, log=print):
    """Builds every optimiser on the same expert variables, counts its state (its variables but the iteration
    counter and learning rate) and times its step. Returns {"variables": [(path, shape)], "params": n,
    "param_bytes": b, "results": {name: {...}}}."""
    import tensorflow as tf

    from zoo.factorized_adam import optimizer_state_bytes
    from zoo.models.compute import optimizer_state, variable_bytes

    check_sizes(sizes, repeats=repeats)
    layer, variables = expert_variables(sizes, biases, seed)
    rng = np.random.default_rng(seed)  # fixed gradients, small enough that a few steps leave the weights sensible
    gradients = [tf.constant(1e-3 * rng.standard_normal(tuple(v.shape), dtype=np.float32)) for v in variables]
    results, steps = {}, {}
    for name in optimizers:
        optimizer = make_optimizer(name)
        optimizer.build(variables)
        state = optimizer_state(optimizer, [])[1]
        r = results[name] = {"state_bytes": sum(map(variable_bytes, state)), "state_variables": len(state)}
        if name == "factorized_adam":
            r.update(helper_state_bytes=optimizer_state_bytes(optimizer),
                     factored=[bool(optimizer.uses_factored_state(v)) for v in variables])
        update = tf.function(lambda grads, o=optimizer: o.apply_gradients(zip(grads, variables)))  # its iterations
        steps[name] = lambda update=update: int(update(gradients))  # int(): waits for it; the warm-up traces it
        log(f"  {OPTIMIZER_LABELS[name]}: built, {r['state_bytes'] / 2**20:,.2f} MiB of state in {len(state)} "
            "variables", flush=True)
    for name, m in harness.measure(steps, repeats).items():
        results[name].update(harness.summary(m["times_s"], m["warmup_s"]))
    adam = results.get("adam")
    for r in results.values():
        r["bytes_vs_adam"] = r["state_bytes"] / adam["state_bytes"] if adam else None
        r["time_vs_adam"] = r["median_s"] / adam["median_s"] if adam else None
    return {"variables": [(v.path, list(v.shape)) for v in variables],
            "params": sum(int(np.prod(v.shape)) for v in variables),
            "param_bytes": sum(map(variable_bytes, variables)), "results": results}


def optimizer_memory(argv):
    """`zoo benchmark optimizer-memory`: optimiser state and step time for a large layer's experts."""
    p = harness.parser("optimizer-memory", optimizer_memory.__doc__, 5, "timed steps after 1 warm-up step (default 5)")
    p.add_argument("--biases", action="store_true", help="also the expert biases [E, hidden] and [E, output]")
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS), help="subset of " + ",".join(OPTIMIZERS))
    args, sizes = parse_sized(p, argv, MEMORY_FULL, MEMORY_SMALL, MEMORY_HELP)
    harness.at_least_one(args, *MEMORY_FULL)
    sizes = {"experts": sizes["experts"], "k": min(4, sizes["experts"]), **sizes}
    optimizers = tuple(listed(args.optimizers))
    for name in optimizers:
        if name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}.")
    out = harness.header("optimizer-memory", argv, sizes=sizes, biases=args.biases, repeats=args.repeats,
                         seed=args.seed)
    harness.cpu_tensorflow(args.threads)
    print(f"optimizer-memory: the expert {'variables' if args.biases else 'matrices'} of SparseMoE({sizes['experts']}, "
          f"{sizes['k']}, {sizes['hidden']}) on input {sizes['input_dim']}; 1 warm-up step, then {args.repeats} timed "
          f"steps, optimisers interleaved; seed {args.seed}")
    print(f"machine: {harness.machine_summary()}; {harness.versions()}; device CPU", flush=True)
    report = memory_benchmark(sizes, optimizers, args.repeats, args.biases, args.seed)
    lines = ["", "variables: " + ", ".join(f"{path} {shape}" for path, shape in report["variables"])
             + f" = {report['params']:,} parameters, {report['param_bytes'] / 2**20:,.1f} MiB", harness.text_table(
                 [("optimizer", -20), ("state vars", 10), ("state bytes", 15), ("MiB", 10), ("bytes/param", 11),
                  ("vs Adam", 8), ("median s", 9), ("min s", 8), ("steps", 5), ("time vs Adam", 12)],
                 [[OPTIMIZER_LABELS[name], r["state_variables"], f"{r['state_bytes']:,d}",
                   f"{r['state_bytes'] / 2**20:,.2f}", f"{r['state_bytes'] / report['params']:.4f}",
                   harness.fmt(r["bytes_vs_adam"], ".3%"), f"{r['median_s']:.4f}", f"{r['min_s']:.4f}",
                   len(r["times_s"]), harness.fmt(r["time_vs_adam"], ".2f") + "x"]
                  for name, r in report["results"].items()])]
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
