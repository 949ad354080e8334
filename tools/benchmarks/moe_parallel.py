"""`zoo benchmark moe-parallel`: expert parallelism against the replicated MoE, measured and on paper.

How it measures: docs/benchmarks.md#moe-parallel.
"""

import json
import math

from zoo.tools.benchmarks import harness, moe
from zoo.tools.benchmarks.harness import fmt

FULL = {"experts": 32, "k": 4, "hidden": 256, "width": 128, "vocabulary": 2000, "batch": 64, "seq_len": 64}
SMALL = {"experts": 8, "k": 2, "hidden": 16, "width": 8, "vocabulary": 64, "batch": 8, "seq_len": 8}
PRESET = "lstm-moe-ptb"  # the family and optimiser layout; every size is overridden
SEED = 0
PAPER_MODELS = ("moe-1024-h", "moe-4096-h", "moe-65536-h")
# Appendix D's MoE-65536-h: moe-4096-h's stack with a hierarchical MoE of first-level branching factor 256
DERIVED = {"moe-65536-h": ("moe-4096-h", {"num_experts": 65536, "k": 2, "hidden_units": 1024, "groups": 256})}
# the flags of the paper's assumptions (zoo.models.compute.expert_parallel_cost's): (key, type, what)
PAPER_FLAGS = {"--tokens-per-gpu": ("tokens_per_gpu", int, "Appendix C.1"),
               "--paper-capacity-factor": ("capacity_factor", float, "on paper"),
               "--network-gbits": ("network_Gbps", float, "gigabits/s per GPU between nodes"),
               "--nvlink-gbytes": ("nvlink_GBps", float, "gigabytes/s per GPU inside a node")}
STEP_COLUMNS = [("R", 2), ("model", -24), ("median s", 9), ("min s", 8), ("median/repl.", 12), ("paired ratio", 12),
                ("dropped", 8), ("capacity", 8), ("all-to-all/replica/step", 23)]
MEMORY_COLUMNS = [("R", 2), ("model", -16), ("expert vars", 12), ("expert state", 13), ("other vars", 11),
                  ("other state", 12), ("all-reduced/step", 17), ("experts in it", 13), ("embedding in it", 15)]
PAPER_COLUMNS = [("model", -12), ("GPUs", 4), ("mode", -15), ("experts/GPU", 11), ("expert weights", 14),
                 ("weights+grads+state", 19), ("fits", 4), ("all-reduce", 19), ("emb. all-gather", 19),
                 ("all-to-all", 19), ("comm. ms", 9)]
# the child process of one replica count (harness.python_child): its answer is `worker(spec)`
CHILD = "from zoo.tools.benchmarks.moe_parallel import worker\nharness.answer(worker, json.loads(sys.argv[1]))"


def check_sizes(sizes, replicas_list, capacity_factors):
    moe.check_sizes(sizes)  # every size >= 1
    if sizes["k"] > sizes["experts"]:
        raise ValueError(f"-k {sizes['k']} must be at most --experts {sizes['experts']}.")
    for r in replicas_list:
        if r < 2:
            raise ValueError(f"every replica count must be >= 2 (expert parallelism needs replicas), got {r}.")
        for key in ("experts", "batch"):
            if sizes[key] % r:
                raise ValueError(f"--{key} {sizes[key]} must be divisible by every replica count, not by {r}.")
    for cf in capacity_factors:
        if not cf > 0 or not math.isfinite(cf):
            raise ValueError(f"capacity factors must be finite numbers > 0, got {cf}.")


# ---- what a replica holds ------------------------------------------------------------------------
def memory_accounting(model, optimizer, strategy):
    """Bytes each replica holds (`experts`, `expert_state`, `other`, `other_state`: lists, one entry a
    replica) and the bytes all-reduced per step (`all_reduced`, `all_reduced_experts`, `embedding`):
    docs/benchmarks.md#moe-parallel, part 2."""
    import keras

    from zoo.layers.expert_parallel import is_expert_shard
    from zoo.models.compute import is_expert_variable, optimizer_state, variable_bytes as size

    replicas = strategy.num_replicas_in_sync

    def held(variables):  # a MirroredVariable's or SyncOnReadVariable's components, in replica order
        out = [0] * replicas
        for v in variables:
            components = strategy.experimental_local_results(v.value if isinstance(v, keras.Variable) else v)
            if len(components) != replicas:
                raise RuntimeError(f"{v.path}: {len(components)} components for {replicas} replicas.")
            out = [n + size(c) for n, c in zip(out, components)]
        return out

    experts = [v for v in model.weights if is_expert_variable(v)]
    expert_state, other_state = optimizer_state(optimizer, experts)
    reduced = [v for v in model.trainable_variables if not is_expert_shard(v)]
    return {"experts": held(experts), "expert_state": held(expert_state),
            "other": held([v for v in model.weights if not is_expert_variable(v)]), "other_state": held(other_state),
            "all_reduced": sum(map(size, reduced)),
            "all_reduced_experts": sum(size(v) for v in reduced if is_expert_variable(v)),
            "embedding": sum(size(v) for v in reduced if "embedding" in v.path.rsplit("/", 1)[-1]),
            "expert_parallel": any(map(is_expert_shard, model.trainable_variables))}


def exchange_bytes(sizes, replicas, capacity_factor):
    """Bytes one replica sends by all-to-all per step (dispatch and return, forward and backward):
    blocks [R, E/R, capacity, width], capacity = ceil(cf · tokens per replica · k / E)."""
    tokens = sizes["batch"] // replicas * sizes["seq_len"]
    capacity = math.ceil(capacity_factor * tokens * sizes["k"] / sizes["experts"])
    block = sizes["experts"] * capacity * sizes["width"] * 4  # float32 [R, E/R, capacity, d] = E · capacity · d
    return {"capacity": capacity, "block_bytes": block, "sent_bytes": 4 * block * (replicas - 1) // replicas}


# ---- the child: one replica count ----------------------------------------------------------------
def worker(spec):
    """The child process's answer: on R logical CPUs, the replicated and the expert-parallel models
    on one MirroredStrategy, their steps timed interleaved."""
    replicas, sizes, seed = spec["replicas"], spec["sizes"], spec["seed"]
    tf = harness.cpu_tensorflow(spec.get("threads"))
    cpu = tf.config.list_physical_devices("CPU")[0]  # R logical CPU devices, configured before TensorFlow starts
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    import keras
    import numpy as np

    from zoo.training.data import TrainingWindows
    from zoo.training.steps import step_functions
    from zoo.training.trainer import build_model

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    rng = np.random.default_rng(seed)
    shape = (sizes["batch"] * 4, sizes["seq_len"])  # four distinct global batches (inputs, targets), cycled
    ids = [rng.integers(2, sizes["vocabulary"], shape).astype("int32") for _ in range(2)]
    windows = TrainingWindows(*ids, np.ones(shape, "float32"), sizes["batch"], seed)
    lstm = {"type": "lstm", "units": sizes["width"]}  # the timed model: LSTM, MoE, LSTM at `sizes`
    overrides = {"vocabulary_size": sizes["vocabulary"], "embedding_dim": sizes["width"], "dropout": 0.0,
                 "layers": [lstm, {"type": "moe", "num_experts": sizes["experts"], "k": sizes["k"],
                                   "hidden_units": sizes["hidden"]}, lstm],
                 "optimizer": {"name": "factorized_adam", "learning_rate": 2e-3, "global_clipnorm": 1.0}}
    models, steps = {}, {}
    for cf in [None] + spec["capacity_factors"]:
        label = "replicated" if cf is None else f"expert-parallel cf {cf:g}"
        keras.utils.set_random_seed(seed)
        build_s, (model, optimizer) = harness.timed(build_model, PRESET, overrides, None, strategy, capacity_factor=cf)
        train = step_functions(model, optimizer, strategy).train
        iterator = iter(strategy.distribute_datasets_from_function(lambda ctx: windows.dataset(0, ctx)))
        losses = []  # a step has finished once its loss exists
        models[label] = (cf, model, optimizer, build_s, losses)
        steps[label] = lambda train=train, it=iterator, losses=losses: losses.append(float(train(it)))
    measured = harness.measure(steps, spec["repeats"], spec["warmup"])
    out = {"replicas": replicas, "tensorflow": tf.__version__, "keras": keras.__version__,
           "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
           "devices": [d.name for d in tf.config.list_logical_devices("CPU")], "models": {}}
    for label, (cf, model, optimizer, build_s, losses) in models.items():
        times = measured[label]["times_s"]
        r = out["models"][label] = {
            "capacity_factor": cf, "params": int(model.count_params()), "build_s": build_s,
            **harness.summary(times, measured[label]["warmup_s"]),
            "paired_ratio": harness.paired_ratio(times, measured["replicated"]["times_s"]), "loss": losses[-1],
            "losses_finite": all(map(math.isfinite, losses)), "memory": memory_accounting(model, optimizer, strategy)}
        if cf is not None:
            r["dropped"] = sum(float(m.result()) for m in model.metrics if m.name.endswith("_dropped"))
            r["dropped_fraction"] = r["dropped"] / (len(losses) * sizes["batch"] * sizes["seq_len"] * sizes["k"])
            r["exchange"] = exchange_bytes(sizes, replicas, cf)
    return out


# ---- the paper model: zoo.models.compute's arithmetic for the paper's large models -------------------
def paper_defaults():
    """The assumptions of `zoo.models.compute.expert_parallel_cost` by default: `{keyword: value}`."""
    import inspect

    from zoo.models.compute import expert_parallel_cost

    return {k: p.default for k, p in inspect.signature(expert_parallel_cost).parameters.items() if k != "shapes"}


def paper_model(names, assumptions):
    """`{"assumptions": …, "models": {name: shapes}, "rows": [...]}`: `compute.expert_parallel_cost` of the
    paper's models (`DERIVED`: built from a preset) under its defaults, updated by the `assumptions` given."""
    from zoo.models import compute
    from zoo.registry import get_preset

    settings = {**paper_defaults(), **{k: v for k, v in assumptions.items() if v is not None}}
    shapes = {}
    for name in names:
        base, moe = DERIVED.get(name, (name, None))
        layers = get_preset(base).config["layers"]
        if moe is not None:
            layers = [dict(layer) if layer.get("type") != "moe" else {"type": "moe", **moe} for layer in layers]
        if (found := sum(layer.get("type") == "moe" for layer in layers)) != 1:
            raise ValueError(f"{name}: the paper model expects one MoE layer, found {found}.")
        shapes[name] = {"name": name, "base_preset": base, **compute.training_shapes(base, layers=layers)}
    return {"assumptions": settings, "models": shapes, "rows": [
        {"model": name, **row} for name in names for row in compute.expert_parallel_cost(shapes[name], **settings)]}


# ---- the parent ----------------------------------------------------------------------------------
def run_benchmark(sizes, replicas_list=(2, 4), capacity_factors=(1.0, 2.0), warmup=2, repeats=15, threads=0,
                  seed=SEED, paper_names=PAPER_MODELS, paper_assumptions=None, log=print):
    """Every replica count in its own child, then the paper model; returns the report."""
    check_sizes(sizes, replicas_list, capacity_factors)
    if repeats < 1 or warmup < 0:
        raise ValueError(f"--repeats must be >= 1 and --warmup >= 0, got {repeats} and {warmup}.")
    measured = {}
    for replicas in replicas_list:
        spec = {"replicas": replicas, "sizes": sizes, "capacity_factors": list(capacity_factors), "warmup": warmup,
                "repeats": repeats, "threads": threads, "seed": seed}
        log(f"R = {replicas}: a child process with {replicas} logical CPU devices ...", flush=True)
        try:
            wall, result = harness.timed(harness.python_child, CHILD, [json.dumps(spec)], f"R = {replicas}", None)
        except RuntimeError as e:
            log(f"  FAILED: {e}", flush=True)
            measured[replicas] = None
            continue
        measured[replicas] = dict(result, wall_s=wall)
        replicated = result["models"]["replicated"]["median_s"]
        for label, r in result["models"].items():
            r["vs_replicated"] = r["median_s"] / replicated if replicated and r["median_s"] else None
            log(f"  {label}: median {fmt(r['median_s'], '.3f')} s over {len(r['times_s'])} steps "
                f"({fmt(r['vs_replicated'], '.2f')}x replicated; paired ratio {fmt(r['paired_ratio'], '.2f')}x)",
                flush=True)
    paper = paper_model(paper_names, paper_assumptions or {}) if paper_names else None
    return {"sizes": sizes, "replicas": list(replicas_list), "capacity_factors": list(capacity_factors),
            "warmup": warmup, "repeats": repeats, "seed": seed, "measured": measured, "paper": paper}


def _size(n):
    """`n` bytes in GB, MB, kB or B; "-" for None."""
    if n is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def tables(report):
    """The three parts' tables of `report`, each under its title."""
    sizes, steps, memory = report["sizes"], [], []
    for replicas, result in report["measured"].items():
        models = result["models"] if result else {}
        steps += [[replicas, "FAILED (see above)"]] if result is None else [
            [replicas if i == 0 else "", label, fmt(r["median_s"], ".3f"), fmt(r["min_s"], ".3f"),
             fmt(r["vs_replicated"], ".2f") + "x", fmt(r["paired_ratio"], ".2f") + "x",
             fmt(r.get("dropped_fraction"), ".2%"), fmt(r.get("exchange", {}).get("capacity"), ""),
             _size(r.get("exchange", {}).get("sent_bytes"))] for i, (label, r) in enumerate(models.items())]
        for i, r in enumerate(list(models.values())[:2]):  # the replicated model and the first expert-parallel one
            m, base = r["memory"], models["replicated"]["memory"]
            memory.append([replicas if i == 0 else "", "expert-parallel" if i else "replicated",
                           _size(max(m["experts"])) + (f" (1/{base['experts'][0] / m['experts'][0]:g})" if i else ""),
                           *(_size(max(m[key])) for key in ("expert_state", "other", "other_state")),
                           _size(m["all_reduced"]), format(m["all_reduced_experts"] / m["all_reduced"], ".1%"),
                           format(m["embedding"] / m["all_reduced"], ".1%")])
    text = [f"1. step time (forward + backward + FactorizedAdam update), {sizes['batch'] * sizes['seq_len']:,} tokens "
            f"per global step, median of {report['repeats']} interleaved steps after {report['warmup']} warm-up",
            harness.text_table(STEP_COLUMNS, steps),
            "\n2. memory per replica (sums of the per-replica components of the variables; float32)",
            harness.text_table(MEMORY_COLUMNS, memory)]
    if not report.get("paper"):
        return "\n".join(text)
    a = report["paper"]["assumptions"]
    rows = [[row["model"], row["gpus"], row["mode"], *([f"skipped ({row['skipped']})"] if "skipped" in row else [
        f"{row['experts_per_gpu']:,}", _size(row["expert_weight_bytes"]), _size(row["held_bytes"]),
        "yes" if row["fits"] else "no", *(f"{_size(row[w + '_bytes_per_gpu'])}, {row[w + '_s'] * 1e3:,.1f} ms"
                                          for w in ("all_reduce", "embedding_all_gather", "all_to_all")),
        f"{row['communication_s'] * 1e3:,.1f}"])] for row in report["paper"]["rows"]]
    return "\n".join(text + [
        f"\n3. on paper, per GPU and step: {a['tokens_per_gpu']:,} tokens per GPU, capacity factor "
        f"{a['capacity_factor']:g}, {a['gpus_per_node']} GPUs per node, NVLink {a['nvlink_GBps']:g} GB/s inside a "
        f"node, {a['network_Gbps']:g} Gb/s per GPU between nodes, {a['gpu_memory_GB']:g} GB per GPU",
        harness.text_table(PAPER_COLUMNS, rows)])


def main(argv):
    p = harness.parser("moe-parallel", __doc__, 15, "timed steps per model, interleaved (default 15)")
    p.add_argument("--replicas", default="2,4", help="replica counts, each in its own child process (default 2,4)")
    p.add_argument("--capacity-factors", default="1,2",
                   help="expert-parallel capacity factors timed beside the replicated model (default 1,2)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first (default 2)")
    p.add_argument("--paper-models", default=",".join(PAPER_MODELS),
                   help=f"models on paper (default {','.join(PAPER_MODELS)}; '' for none)")
    p.add_argument("--gpus", default="8,64", help="GPU counts on paper (default 8,64)")
    defaults = paper_defaults()
    for flag, (key, kind, what) in PAPER_FLAGS.items():
        p.add_argument(flag, dest=key, type=kind, help=f"{what} (default {defaults[key]:,g})")
    args, sizes = moe.parse_sized(p, argv, FULL, SMALL)
    replicas_list, capacity_factors = moe.listed(args.replicas, int), moe.listed(args.capacity_factors, float)
    check_sizes(sizes, replicas_list, capacity_factors)
    out = harness.header("moe-parallel", argv)
    print(f"model: {PRESET} resized, LSTM {sizes['width']} / SparseMoE {sizes['experts']} experts of ReLU hidden "
          f"{sizes['hidden']}, k = {sizes['k']} / LSTM {sizes['width']}, vocabulary {sizes['vocabulary']:,} (full "
          f"softmax), FactorizedAdam (global_clipnorm 1), global batch {sizes['batch']} x {sizes['seq_len']} tokens, "
          f"MirroredStrategy on R logical CPU devices; seed {args.seed}")
    print(f"machine: {harness.machine_summary()}", flush=True)
    assumptions = {key: getattr(args, key) for key, _, _ in PAPER_FLAGS.values()}
    report = run_benchmark(sizes, replicas_list, capacity_factors, args.warmup, args.repeats, args.threads, args.seed,
                           moe.listed(args.paper_models), dict(assumptions, gpus=tuple(moe.listed(args.gpus, int))))
    print(f"\n{tables(report)}\n\nWhat each column means, and what the figures can show and cannot: "
          f"docs/benchmarks.md#moe-parallel\nload average at the end: {harness.load_average_text()}")
    return harness.report(args, {**out, **report, "measured": {str(r): v for r, v in report["measured"].items()}})
