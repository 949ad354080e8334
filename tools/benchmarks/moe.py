"""`zoo benchmark moe`: step time of the sparse mixture of experts as the number of experts grows.

How it measures: docs/benchmarks.md#moe.
"""

import gc
import sys

import numpy as np

from zoo.tools.benchmarks import harness

FULL = {"tokens": 8192, "input_dim": 512, "hidden": 1024, "k": 4, "group_size": 512}
SMALL = {"tokens": 512, "input_dim": 64, "hidden": 128, "k": 4, "group_size": 128}
DEFAULT_EXPERTS = (4, 32, 256)
MODELS = ("ours", "dense", "official")
LABELS = {
    "ours": "ours SparseMoE",
    "dense": "dense reference",
    "official": "tf-models MoeLayer",
}
SEED = 0


# ---- the dense reference ----------------------------------------------------------------------
def all_experts(layer, x):
    """[tokens, E, output]: every expert of a built `SparseMoE` (flat or hierarchical: expert
    (i, j) of a hierarchical layer is i · experts per group + j) on every token of `x` [tokens, d]."""
    from keras import ops

    flat = ops.cast(ops.reshape(x, (-1, layer.input_dim)), layer.compute_dtype)
    w_in, b_in, w_out, b_out = (
        ops.cast(w, layer.compute_dtype)
        for w in (layer.expert_kernel_in, layer.expert_bias_in, layer.expert_kernel_out, layer.expert_bias_out)
    )
    hidden = ops.relu(ops.einsum("nd,edh->neh", flat, w_in) + b_in)
    return ops.einsum("neh,eho->neo", hidden, w_out) + b_out


def dense_reference(layer, x, training=False, noise=None):
    """`Σ_i G(x)_i E_i(x)` with every expert on every token: [tokens, E, hidden] is built.

    Uses `layer`'s (a built flat `SparseMoE`) weights and its gate, so in eval mode (or with the
    same `noise`) it returns what `layer(x)` returns. Returns `(outputs, auxiliary_loss)`, the
    loss being the importance and load terms the layer adds with `add_loss` when training.
    """
    import tensorflow as tf
    from keras import ops

    from zoo.layers.sparse_moe import cv_squared

    if layer.groups:
        raise ValueError("dense_reference is written for a flat SparseMoE (groups=None).")
    flat = ops.cast(ops.reshape(x, (-1, layer.input_dim)), layer.compute_dtype)
    routing = layer.route(flat, training, noise)
    n, experts = ops.shape(flat)[0], layer.num_experts
    # The [tokens, E] gate matrix, zero outside each token's k experts.
    index = routing["token_ids"] * experts + routing["expert_ids"]
    gates = tf.math.unsorted_segment_sum(routing["gates"], index, n * experts)
    gates = ops.cast(ops.reshape(gates, (-1, experts)), layer.compute_dtype)
    mixed = ops.einsum("ne,neo->no", gates, all_experts(layer, flat))
    auxiliary = ops.zeros((), "float32")
    if training:
        if layer.importance_weight:
            auxiliary += ops.cast(layer.importance_weight * cv_squared(routing["importance"]), "float32")
        if layer.load_weight:
            auxiliary += ops.cast(layer.load_weight * cv_squared(routing["load"]), "float32")
    return ops.reshape(mixed, tuple(ops.shape(x)[:-1]) + (layer.output_dim,)), auxiliary


# ---- cost model (for the table and the skip estimates) ------------------------------------------
def forward_gflop(model, tokens, input_dim, hidden, experts, k, group_size):
    """2 × the forward multiply-adds of the gate matmuls (ours and the dense reference: clean and
    noise logits, `2 · d · E` per token; MoeLayer's router: `d · E`), the expert matmuls, and for
    MoeLayer its dispatch and combine einsums. A training step is about 3 times this."""
    per_assignment = input_dim * hidden + hidden * input_dim
    if model == "dense":
        macs = tokens * experts * per_assignment + 2 * tokens * input_dim * experts
    elif model == "ours":
        macs = tokens * k * per_assignment + 2 * tokens * input_dim * experts
    else:
        macs = tokens * k * per_assignment + 2 * tokens * k * group_size * input_dim + tokens * input_dim * experts
    return 2 * macs / 1e9


def dense_activation_bytes(tokens, input_dim, hidden, experts):
    """Rough peak of the dense reference's [tokens, E, ·] tensors in a step: hidden and outputs, the
    ReLU's saved input, and their gradients."""
    return 4 * tokens * experts * (hidden + input_dim) * 3


def estimate_step_s(measured, experts, cost):
    """Step time at `experts` from {E: median s} measured at smaller E: the median at the largest
    such E scaled by the ratio of `cost(E)` (the modelled FLOPs); None when nothing was measured."""
    smaller = [e for e, t in measured.items() if t is not None and e < experts]
    if not smaller:
        return None
    e0 = max(smaller)
    return measured[e0] * cost(experts) / cost(e0)


def _available_bytes():
    try:
        return harness.proc_kib("MemAvailable", "/proc/meminfo") * 1024
    except (OSError, RuntimeError):
        return None


# ---- the steps ----------------------------------------------------------------------------------
def training_step(forward, variables):
    """A `tf.function` of the input: the loss `mean(output²) + auxiliary losses` and its gradients
    w.r.t. `variables` and the input, `forward(inputs)` giving `(outputs, auxiliary)`."""
    import tensorflow as tf

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs, auxiliary = forward(inputs)
            loss = tf.reduce_mean(tf.square(outputs)) + auxiliary
        return loss, tape.gradient(loss, variables + [inputs])

    return step


def _with_losses(layer):
    """`layer`'s training call, with the sum of the losses it adds (0 when none)."""
    import tensorflow as tf

    def forward(inputs):
        outputs = layer(inputs, training=True)
        return outputs, tf.add_n(layer.losses) if layer.losses else 0.0

    return forward


def _make_models(models, experts, sizes, seed):
    """{model: (step function, argument, parameter count)} for one number of experts."""
    import keras
    import tensorflow as tf

    from zoo.layers.sparse_moe import SparseMoE

    tokens, d, h, k, group = (sizes[key] for key in ("tokens", "input_dim", "hidden", "k", "group_size"))
    x = np.random.default_rng(seed).standard_normal((tokens, d), dtype=np.float32)
    built = {}
    if "ours" in models or "dense" in models:
        keras.utils.set_random_seed(seed)
        layer = SparseMoE(experts, k, h)
        layer.build((None, d))
        params = int(layer.count_params())
        variables = list(layer.trainable_variables)
        if "ours" in models:
            built["ours"] = (training_step(_with_losses(layer), variables), tf.constant(x), params)
        if "dense" in models:
            dense = training_step(lambda inputs: dense_reference(layer, inputs, training=True), variables)
            built["dense"] = (dense, tf.constant(x), params)
    if "official" in models:
        built["official"] = _official_model(x, experts, sizes, seed)
    return built


def _official_model(x, experts, sizes, seed):
    """tf-models-official's MoeLayer (expert choice, capacity factor k): its step, its grouped input
    and its parameter count."""
    import tensorflow as tf

    from zoo.tools.cli.workshop import dependency

    dependency("official", "zoo benchmark moe --models official")  # one sentence if tf-models-official is missing
    import tf_keras  # comes with tf-models-official
    from official.nlp.modeling.layers import ExpertsChooseMaskedRouter, FeedForwardExperts, MoeLayer

    tokens, d, h, k, group = (sizes[key] for key in ("tokens", "input_dim", "hidden", "k", "group_size"))
    tf_keras.utils.set_random_seed(seed)
    moe = MoeLayer(
        FeedForwardExperts(experts, h, activation=tf_keras.activations.relu),
        ExpertsChooseMaskedRouter(experts),
        train_capacity_factor=float(k),
        eval_capacity_factor=float(k),
        examples_per_group=1.0,
    )
    grouped_x = tf.constant(x.reshape(tokens // group, group, d))
    moe(grouped_x[:1], training=False)  # builds the weights
    return training_step(_with_losses(moe), list(moe.trainable_variables)), grouped_x, int(moe.count_params())


def skip_reason(model, experts, measured, sizes, max_step_s, available_bytes=None):
    """None to run `model` at `experts`, else {"skipped": why, "estimate_s": …, "fwd_gflop": …}.

    `measured` holds the model's own medians {E: s} so far. Ours always runs."""
    tokens, d, h, k, group = (sizes[key] for key in ("tokens", "input_dim", "hidden", "k", "group_size"))
    gflop = forward_gflop(model, tokens, d, h, experts, k, group)
    if model == "ours":
        return None
    estimate = estimate_step_s(measured, experts, lambda e: forward_gflop(model, tokens, d, h, e, k, group))
    reason = None
    if estimate is not None and estimate > max_step_s:
        reason = f"est. {estimate:.0f} s/step > --max-step-s {max_step_s:g}"
    elif model == "dense" and available_bytes is not None:
        need = dense_activation_bytes(tokens, d, h, experts)
        if need > 0.6 * available_bytes:
            reason = (f"needs ~{need / 2**30:.1f} GiB of activations, {available_bytes / 2**30:.1f} GiB available"
                      + (f"; est. {estimate:.0f} s/step" if estimate is not None else ""))
    elif model == "official" and round(k * group / experts) < 1:
        reason = f"capacity round(k·group/E) = 0 (group {group}, E {experts})"
    return {"skipped": reason, "estimate_s": estimate, "fwd_gflop": gflop} if reason else None


def check_sizes(sizes, experts_list):
    for key in ("tokens", "input_dim", "hidden", "k", "group_size"):
        if sizes[key] < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {sizes[key]}.")
    if sizes["tokens"] % sizes["group_size"]:
        raise ValueError(f"--group-size {sizes['group_size']} must divide --tokens {sizes['tokens']} "
                         "(MoeLayer routes within groups of that many tokens).")
    for experts in experts_list:
        if experts < sizes["k"]:
            raise ValueError(f"every number of experts must be >= k = {sizes['k']}, got {experts}.")


def run_benchmark(sizes, experts_list, models=MODELS, repeats=3, max_step_s=120.0, seed=SEED, log=print):
    """Times every (E, model) configuration; returns {"configs": {E: {model: result}}, ...}.

    A result is {"median_s", "min_s", "times_s", "warmup_s", "loss", "params", "fwd_gflop"} or
    {"skipped": reason, "estimate_s": …}.
    """
    check_sizes(sizes, experts_list)
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}.")
    tokens, d, h, k, group = (sizes[key] for key in ("tokens", "input_dim", "hidden", "k", "group_size"))
    medians = {m: {} for m in models}
    configs = {}
    for experts in sorted(experts_list):
        results, running = {}, []
        for model in models:
            skipped = skip_reason(model, experts, medians[model], sizes, max_step_s, _available_bytes())
            if skipped:
                results[model] = skipped
                continue
            running.append(model)
        log(f"E = {experts}: building {', '.join(LABELS[m] for m in running) or 'nothing'}"
            + "".join(f"; {LABELS[m]} skipped ({r['skipped']})" for m, r in results.items()), flush=True)
        built = _make_models(running, experts, sizes, seed)
        # float(loss): on the CPU the step has finished once its outputs exist; the warm-up traces it
        measured = harness.measure({m: (lambda s=built[m][0], x=built[m][1]: float(s(x)[0])) for m in running}, repeats)
        for model in running:
            r = measured[model]
            results[model] = {"params": built[model][2], **harness.summary(r["times_s"], r["warmup_s"]),
                              "loss": r["result"], "fwd_gflop": forward_gflop(model, tokens, d, h, experts, k, group)}
            medians[model][experts] = r["median_s"]
            log(f"  {LABELS[model]}: median {r['median_s']:.3f} s over {repeats} steps", flush=True)
        results = {m: results[m] for m in models}  # table order
        del built
        gc.collect()  # frees this E's weights before the next, larger one
        configs[experts] = results
    ours = medians.get("ours", {})
    lo, hi = min(experts_list), max(experts_list)
    ratio = ours[hi] / ours[lo] if lo in ours and hi in ours and hi != lo else None
    return {"configs": configs, "ours_ratio": ratio, "ratio_experts": (lo, hi)}


# ---- command line ---------------------------------------------------------------------------------
def table(report):
    rows = []
    for experts, results in report["configs"].items():
        ours = results.get("ours", {}).get("median_s")
        for i, (model, r) in enumerate(results.items()):
            first = [experts if i == 0 else "", LABELS[model]]
            if "skipped" in r:
                rows.append(first + ["", f"{r['fwd_gflop']:.2f}", f"skipped ({r['skipped']})"])
                continue
            rows.append(first + [f"{r['params']:,d}", f"{r['fwd_gflop']:.2f}", f"{r['median_s']:.3f}",
                                 f"{r['min_s']:.3f}", len(r["times_s"]), f"{r['median_s'] / ours:.2f}x" if ours else "-"])
    return harness.text_table([("experts", 7), ("model", -20), ("params", 12), ("fwd GFLOP", 9), ("median s", 9),
                               ("min s", 8), ("steps", 5), ("vs ours", 8)], rows)


def parse(argv):
    """The flags, the sizes they give, the numbers of experts and the models."""
    p = harness.parser("moe", __doc__, 3, "timed steps after 1 warm-up step (default 3)")
    p.add_argument("--experts", default=",".join(map(str, DEFAULT_EXPERTS)),
                   help="numbers of experts, comma-separated (default 4,32,256)")
    p.add_argument("--tokens", type=int, help=f"tokens per step (default {FULL['tokens']}; --small {SMALL['tokens']})")
    p.add_argument("--input-dim", type=int, help=f"input (= output) width (default {FULL['input_dim']})")
    p.add_argument("--hidden", type=int, help=f"each expert's hidden width (default {FULL['hidden']})")
    p.add_argument("-k", type=int, help=f"experts per token (default {FULL['k']})")
    p.add_argument("--group-size", type=int,
                   help=f"MoeLayer tokens per routing group (default {FULL['group_size']}; --small {SMALL['group_size']})")
    p.add_argument("--small", action="store_true",
                   help="smoke test: tokens 512, input 64, hidden 128 (explicit size flags still win)")
    p.add_argument("--max-step-s", type=float, default=120.0,
                   help="skip a dense/MoeLayer configuration whose estimated step time exceeds this (default 120)")
    p.add_argument("--models", default=",".join(MODELS), help="subset of ours,dense,official")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (default 0: TensorFlow's choice)")
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    sizes = dict(SMALL if args.small else FULL)
    for key in ("tokens", "input_dim", "hidden", "k", "group_size"):
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    sizes["group_size"] = min(sizes["group_size"], sizes["tokens"])
    experts_list = [int(e) for e in args.experts.split(",") if e.strip()]
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"unknown models {unknown}; choose from {', '.join(MODELS)}.")
    check_sizes(sizes, experts_list)
    return args, sizes, experts_list, models


def main(argv):
    args, sizes, experts_list, models = parse(argv)
    out = harness.header("moe", argv, sizes=sizes, experts=experts_list, repeats=args.repeats,
                         max_step_s=args.max_step_s, seed=args.seed)
    tf = harness.cpu_tensorflow(args.threads)
    tokens, d, h, k, group = (sizes[key] for key in ("tokens", "input_dim", "hidden", "k", "group_size"))
    print(f"moe: one training step = forward (training=True) + gradients w.r.t. all layer weights and the "
          f"input of mean(output²) + auxiliary losses, in a tf.function; {tokens} tokens/step, input = "
          f"output {d}, expert hidden {h} (ReLU), k = {k}; MoeLayer: expert-choice router, capacity "
          f"factor {k}, groups of {group} tokens; seed {args.seed}")
    print(f"machine: {harness.machine_summary()}; TF intra-op threads "
          f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}; {harness.versions()}; device CPU")
    print(f"repeats: 1 warm-up step, then {args.repeats} timed steps per configuration, models interleaved; "
          f"skip a dense/MoeLayer configuration estimated over {args.max_step_s:g} s/step", flush=True)
    report = run_benchmark(sizes, experts_list, models, args.repeats, args.max_step_s, args.seed)
    lo, hi = report["ratio_experts"]
    text = "\n" + table(report) + "\n"
    if report["ours_ratio"] is not None:
        text += (f"ours t({hi})/t({lo}) = {report['ours_ratio']:.2f} (target <= 1.5: capacity grows, compute per "
                 f"token does not)\n")
    text += ("fwd GFLOP: 2 x multiply-adds of the forward gate and expert matmuls (+ MoeLayer's dispatch/combine "
             "einsums); a step (forward + backward) is about 3x that. 'vs ours': median / ours' median.")
    return harness.report(args, {**out, "configs": {str(e): r for e, r in report["configs"].items()},
                                 "ours_ratio": report["ours_ratio"], "ratio_experts": list(report["ratio_experts"])}, text)


if __name__ == "__main__":
    main(sys.argv[1:])
