"""`zoo benchmark moe-parallel`: expert parallelism against the replicated MoE, measured and on paper.

How it measures: docs/benchmarks.md#moe-parallel.
"""

import json
import math
import sys

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.harness import fmt

FULL = {"experts": 32, "k": 4, "hidden": 256, "width": 128, "vocabulary": 2000, "batch": 64, "seq_len": 64}
SMALL = {"experts": 8, "k": 2, "hidden": 16, "width": 8, "vocabulary": 64, "batch": 8, "seq_len": 8}
DEFAULT_REPLICAS = (2, 4)
DEFAULT_CAPACITY_FACTORS = (1.0, 2.0)
PRESET = "lstm-moe-ptb"  # the family and optimiser layout; every size is overridden
EXPERT_NAMES = ("expert_kernel_in", "expert_bias_in", "expert_kernel_out", "expert_bias_out")
SEED = 0

# ---- the paper model's assumptions -----------------------------------------------------------------
PAPER_MODELS = ("moe-1024-h", "moe-4096-h", "moe-65536-h")
# Appendix D: MoE-65536-h, hierarchical with a first-level branching factor of 256 (not a zoo
# preset: moe-4096-h's stack with that MoE layer).
DERIVED = {"moe-65536-h": ("moe-4096-h", {"num_experts": 65536, "k": 2, "hidden_units": 1024, "groups": 256})}
PAPER_DEFAULTS = {
    "gpus": (8, 64),
    "gpus_per_node": 8,
    "tokens_per_gpu": 18_750,  # Appendix C.1: ~300,000 words per batch on 16 GPUs
    "capacity_factor": 2.0,    # zoo.layers.expert_parallel.DEFAULT_CAPACITY_FACTOR
    "nvlink_GBps": 300.0,      # inside one 8-GPU node, each direction, per GPU
    "network_Gbps": 100.0,     # between nodes, per GPU (one NIC per GPU)
    "gpu_memory_GB": 80.0,
}
FLOAT = 4  # bytes; float32 weights, gradients and exchanged activations


def _label(capacity_factor):
    return "replicated" if capacity_factor is None else f"expert-parallel cf {capacity_factor:g}"


def model_overrides(sizes):
    """The `lstm-moe-ptb` overrides of the timed model: LSTM, MoE, LSTM at `sizes`."""
    width = sizes["width"]
    return {
        "vocabulary_size": sizes["vocabulary"], "embedding_dim": width, "dropout": 0.0,
        "layers": [{"type": "lstm", "units": width},
                   {"type": "moe", "num_experts": sizes["experts"], "k": sizes["k"], "hidden_units": sizes["hidden"]},
                   {"type": "lstm", "units": width}],
        "optimizer": {"name": "factorized_adam", "learning_rate": 2e-3, "global_clipnorm": 1.0},
    }


def check_sizes(sizes, replicas_list, capacity_factors):
    for key, value in sizes.items():
        if value < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {value}.")
    if sizes["k"] > sizes["experts"]:
        raise ValueError(f"-k {sizes['k']} must be at most --experts {sizes['experts']}.")
    for r in replicas_list:
        if r < 2:
            raise ValueError(f"every replica count must be >= 2 (expert parallelism needs replicas), got {r}.")
        if sizes["experts"] % r:
            raise ValueError(f"--experts {sizes['experts']} must be divisible by every replica count, not by {r}.")
        if sizes["batch"] % r:
            raise ValueError(f"--batch {sizes['batch']} must be divisible by every replica count, not by {r}.")
    for cf in capacity_factors:
        if not cf > 0 or not math.isfinite(cf):
            raise ValueError(f"capacity factors must be finite numbers > 0, got {cf}.")


# ---- measured: what each replica holds ---------------------------------------------------------------
def _nbytes(component):
    import numpy as np
    import tensorflow as tf

    return int(np.prod(component.shape.as_list(), dtype=np.int64)) * tf.as_dtype(component.dtype).size


def _components(strategy, variable):
    """The per-replica components of a Keras variable under `strategy`, in replica order (its
    backing `tf.Variable`, `.value`, is a MirroredVariable or a SyncOnReadVariable)."""
    import keras

    value = variable.value if isinstance(variable, keras.Variable) else variable
    return list(strategy.experimental_local_results(value))


def is_expert_variable(variable):
    return getattr(variable, "path", variable.name).rsplit("/", 1)[-1] in EXPERT_NAMES


def memory_accounting(model, optimizer, strategy):
    """Bytes each replica holds, summed over the per-replica components of the variables:
    `{"experts", "expert_state", "other", "other_state"}` as lists (one entry per replica), and
    the bytes all-reduced per step (`all_reduced`: the trainable variables that are not expert
    shards, at their dense size; `all_reduced_experts`: the expert variables among them;
    `embedding`: the embedding, whose gradient is an IndexedSlices that TensorFlow all-gathers)."""
    from zoo.factorized_adam import is_counter_variable
    from zoo.layers.expert_parallel import is_expert_shard

    replicas = strategy.num_replicas_in_sync
    held = {key: [0] * replicas for key in ("experts", "expert_state", "other", "other_state")}
    prefixes = []
    for variable in model.weights:
        key = "experts" if is_expert_variable(variable) else "other"
        if key == "experts":
            prefixes.append(variable.path.replace("/", "_") + "_")
        components = _components(strategy, variable)
        if len(components) != replicas:
            raise RuntimeError(f"{variable.path}: {len(components)} components for {replicas} replicas.")
        for r, c in enumerate(components):
            held[key][r] += _nbytes(c)
    for variable in optimizer.variables:
        if is_counter_variable(optimizer, variable):
            continue
        key = "expert_state" if any(variable.name.startswith(p) for p in prefixes) else "other_state"
        for r, c in enumerate(_components(strategy, variable)):
            held[key][r] += _nbytes(c)
    reduced = [v for v in model.trainable_variables if not is_expert_shard(v)]
    whole = lambda v: _nbytes(_components(strategy, v)[0])  # noqa: E731  (a mirrored variable's one copy)
    return {
        **held,
        "all_reduced": sum(whole(v) for v in reduced),
        "all_reduced_experts": sum(whole(v) for v in reduced if is_expert_variable(v)),
        "embedding": sum(whole(v) for v in reduced if "embedding" in v.path.rsplit("/", 1)[-1]),
        "expert_parallel": any(is_expert_shard(v) for v in model.trainable_variables),
    }


def exchange_bytes(sizes, replicas, capacity_factor):
    """Bytes one replica sends by all-to-all per step (dispatch and return, forward and backward)
    in the timed model: blocks [R, E/R, capacity, width] of float32, capacity =
    ceil(cf · tokens per replica · k / E), of which (R−1)/R leave the replica."""
    tokens = sizes["batch"] // replicas * sizes["seq_len"]
    capacity = math.ceil(capacity_factor * tokens * sizes["k"] / sizes["experts"])
    block = sizes["experts"] * capacity * sizes["width"] * FLOAT  # [R, E/R, capacity, d] = E · capacity · d
    return {"capacity": capacity, "block_bytes": block,
            "sent_bytes": 4 * block * (replicas - 1) // replicas}


# ---- the child: one replica count --------------------------------------------------------------------
def worker(spec):
    """Runs in a child process: R logical CPUs, the replicated and the expert-parallel models on
    one MirroredStrategy, their steps timed interleaved by the harness; returns the result (the
    child's answer)."""
    replicas = spec["replicas"]
    tf = harness.cpu_tensorflow(spec.get("threads"))
    # R logical CPU devices, configured before TensorFlow starts
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    import keras

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    models = _build_models(spec, strategy)

    def step(entry):
        entry["losses"].append(float(entry["steps"].train(entry["iterator"])))  # finished once its loss exists
        entry["steps_run"] += 1

    measured = harness.measure({label: (lambda e=entry: step(e)) for label, entry in models.items()},
                               spec["repeats"], spec["warmup"])
    out = {"replicas": replicas, "tensorflow": tf.__version__, "keras": keras.__version__,
           "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
           "devices": [d.name for d in tf.config.list_logical_devices("CPU")], "models": {}}
    baseline = measured[_label(None)]["times_s"]
    for label, entry in models.items():
        out["models"][label] = _model_result(dict(entry, **measured[label]), baseline, spec, strategy)
    return out


def _build_models(spec, strategy):
    """The replicated model and one expert-parallel model per capacity factor, each with its
    optimiser, its step functions and its iterator over the same synthetic batches."""
    import keras
    import numpy as np

    from zoo.training.data import TrainingWindows
    from zoo.training.steps import step_functions
    from zoo.training.trainer import build_model

    sizes = spec["sizes"]
    batch, seq_len, vocabulary = sizes["batch"], sizes["seq_len"], sizes["vocabulary"]
    rng = np.random.default_rng(spec["seed"])
    rows = batch * 4  # four distinct global batches, cycled
    inputs = rng.integers(2, vocabulary, (rows, seq_len)).astype("int32")
    targets = rng.integers(2, vocabulary, (rows, seq_len)).astype("int32")
    windows = TrainingWindows(inputs, targets, np.ones((rows, seq_len), "float32"), batch, spec["seed"])
    models = {}
    for cf in [None] + spec["capacity_factors"]:
        keras.utils.set_random_seed(spec["seed"])
        build_s, (model, optimizer) = harness.timed(build_model, PRESET, model_overrides(sizes), None, strategy,
                                                    capacity_factor=cf)
        steps = step_functions(model, optimizer, strategy)
        iterator = iter(strategy.distribute_datasets_from_function(lambda ctx: windows.dataset(0, ctx)))
        models[_label(cf)] = {"cf": cf, "model": model, "optimizer": optimizer, "steps": steps,
                              "iterator": iterator, "build_s": build_s, "losses": [], "steps_run": 0}
    return models


def _model_result(entry, baseline, spec, strategy):
    """One model's timings, memory per replica and (expert-parallel) dropped assignments and exchange."""
    sizes = spec["sizes"]
    model = entry["model"]
    metrics = {m.name: float(m.result()) for m in model.metrics if m.name.endswith("_dropped")}
    assignments = entry["steps_run"] * sizes["batch"] * sizes["seq_len"] * sizes["k"]
    result = {
        "capacity_factor": entry["cf"], "params": int(model.count_params()), "build_s": entry["build_s"],
        **harness.summary(entry["times_s"], entry["warmup_s"]),
        "paired_ratio": harness.paired_ratio(entry["times_s"], baseline),
        "loss": entry["losses"][-1], "losses_finite": all(math.isfinite(x) for x in entry["losses"]),
        "memory": memory_accounting(model, entry["optimizer"], strategy),
    }
    if entry["cf"] is not None:
        dropped = sum(metrics.values())
        result.update(dropped=dropped, dropped_fraction=dropped / assignments,
                      exchange=exchange_bytes(sizes, spec["replicas"], entry["cf"]))
    return result


# ---- the paper model ---------------------------------------------------------------------------------
def paper_shapes(name):
    """Shapes of a large model's variables, from its own layers built in a `tf.Graph` (nothing is
    allocated), and of its optimiser's state after `build`: `{"experts", "embedding", "dense"}`
    parameter counts, `{"expert_state", "other_state"}` state bytes, the MoE layer's width `d`
    and assignments per token."""
    import numpy as np
    import tensorflow as tf

    from zoo import registry
    from zoo.factorized_adam import is_counter_variable

    base, moe = DERIVED.get(name, (name, None))
    layers = registry.get_preset(base).config["layers"]
    if moe is not None:
        layers = [dict(layer) if layer.get("type") != "moe" else {"type": "moe", **moe} for layer in layers]
    moe_layers = [layer for layer in layers if layer.get("type") == "moe"]
    if len(moe_layers) != 1:
        raise ValueError(f"{name}: the paper model expects one MoE layer, found {len(moe_layers)}.")
    spec = moe_layers[0]
    k = spec["k"]
    per_token = (k[0] * k[1] if isinstance(k, (list, tuple)) else k * k) if spec.get("groups") else k
    count = lambda v: int(np.prod(v.shape, dtype=np.int64))  # noqa: E731
    with tf.Graph().as_default():
        model = registry.build(base, layers=layers)
        variables = model.trainable_variables
        optimizer = model.make_optimizer()
        optimizer.build(variables)
        experts = [v for v in variables if is_expert_variable(v)]
        prefixes = [v.path.replace("/", "_") + "_" for v in experts]
        out = {
            "name": name, "base_preset": base, "num_experts": spec["num_experts"], "groups": spec.get("groups"),
            "assignments_per_token": per_token, "width": model.embedding_dim,
            "optimizer": type(optimizer).__name__,
            "experts": sum(count(v) for v in experts),
            "embedding": sum(count(v) for v in variables if v.path.rsplit("/", 1)[-1] == "embeddings"),
            "params": sum(count(v) for v in variables),
            "expert_state": 0, "other_state": 0,
        }
        for v in optimizer.variables:
            if is_counter_variable(optimizer, v):
                continue
            key = "expert_state" if any(v.name.startswith(p) for p in prefixes) else "other_state"
            out[key] += count(v) * tf.as_dtype(v.dtype).size
    out["dense"] = out["params"] - out["experts"] - out["embedding"]
    return out


def paper_rows(shapes, gpus=PAPER_DEFAULTS["gpus"], gpus_per_node=PAPER_DEFAULTS["gpus_per_node"],
               tokens_per_gpu=PAPER_DEFAULTS["tokens_per_gpu"], capacity_factor=PAPER_DEFAULTS["capacity_factor"],
               nvlink_GBps=PAPER_DEFAULTS["nvlink_GBps"], network_Gbps=PAPER_DEFAULTS["network_Gbps"],
               gpu_memory_GB=PAPER_DEFAULTS["gpu_memory_GB"]):
    """Per GPU and step, replicated and expert-parallel, at each number of GPUs: the arithmetic of
    docs/benchmarks.md#moe-parallel (part 3). Bytes are exact integers where the formula allows."""
    nvlink, network = nvlink_GBps * 1e9, network_Gbps * 1e9 / 8
    rows = []
    for r in gpus:
        local = min(r, gpus_per_node)
        ring_bw = nvlink if r <= gpus_per_node else network  # a ring crossing nodes runs at the network's pace
        in_node = (local - 1) / (r - 1)  # share of the bytes leaving a GPU that stay in its node
        for mode in ("replicated", "expert-parallel"):
            parallel = mode == "expert-parallel"
            if parallel and shapes["num_experts"] % r:
                rows.append({"model": shapes["name"], "gpus": r, "mode": mode,
                             "skipped": f"{shapes['num_experts']} experts do not split over {r} GPUs"})
                continue
            shard = r if parallel else 1
            expert_bytes = shapes["experts"] * FLOAT // shard
            other_bytes = (shapes["embedding"] + shapes["dense"]) * FLOAT
            expert_state = shapes["expert_state"] // shard
            held = 2 * (expert_bytes + other_bytes) + expert_state + shapes["other_state"]  # weights + grads + state
            reduced = (shapes["dense"] + (0 if parallel else shapes["experts"])) * FLOAT
            all_reduce = 2 * (r - 1) * reduced / r
            all_gather = (r - 1) * tokens_per_gpu * (shapes["width"] + 1) * FLOAT
            all_to_all = (tokens_per_gpu * shapes["assignments_per_token"] * shapes["width"] * FLOAT * 2 * 2
                          * capacity_factor * (r - 1) / r) if parallel else 0.0
            times = {"all_reduce_s": all_reduce / ring_bw, "embedding_all_gather_s": all_gather / ring_bw,
                     "all_to_all_s": all_to_all * in_node / nvlink + all_to_all * (1 - in_node) / network}
            rows.append({
                "model": shapes["name"], "gpus": r, "nodes": -(-r // gpus_per_node), "mode": mode,
                "experts_per_gpu": shapes["num_experts"] // shard,
                "expert_weight_bytes": expert_bytes, "expert_state_bytes": expert_state,
                "held_bytes": held, "fits": held <= gpu_memory_GB * 1e9,
                "all_reduced_bytes": reduced, "all_reduce_bytes_per_gpu": all_reduce,
                "embedding_all_gather_bytes_per_gpu": all_gather, "all_to_all_bytes_per_gpu": all_to_all,
                **times, "communication_s": sum(times.values()),
                "ring_link": "NVLink" if r <= gpus_per_node else "network",
            })
    return rows


def paper_model(names=PAPER_MODELS, **assumptions):
    """`{"assumptions": …, "models": {name: shapes}, "rows": [...]}` for the paper models."""
    settings = dict(PAPER_DEFAULTS, **{k: v for k, v in assumptions.items() if v is not None})
    shapes = {name: paper_shapes(name) for name in names}
    rows = [row for name in names for row in paper_rows(shapes[name], **settings)]
    return {"assumptions": settings, "models": shapes, "rows": rows}


# ---- the parent ----------------------------------------------------------------------------------------
def _worker_child(replicas, sizes, capacity_factors, warmup, repeats, threads, seed, log):
    spec = {"replicas": replicas, "sizes": sizes, "capacity_factors": list(capacity_factors), "warmup": warmup,
            "repeats": repeats, "threads": threads, "seed": seed}
    log(f"R = {replicas}: a child process with {replicas} logical CPU devices ...", flush=True)
    try:  # __spec__.name: this module's importable name, also when it runs as `python -m`
        wall, result = harness.timed(harness.run_once, [sys.executable, "-m", __spec__.name, "--worker",
                                                        json.dumps(spec)], f"R = {replicas}")
    except RuntimeError as e:
        log(f"  FAILED: {e}", flush=True)
        return None
    result["wall_s"] = wall
    replicated = result["models"]["replicated"]["median_s"]
    for label, r in result["models"].items():
        r["vs_replicated"] = r["median_s"] / replicated if replicated and r["median_s"] else None
        log(f"  {label}: median {fmt(r['median_s'], '.3f')} s over {len(r['times_s'])} steps "
            f"({fmt(r['vs_replicated'], '.2f')}x replicated; paired ratio {fmt(r['paired_ratio'], '.2f')}x)",
            flush=True)
    return result


def run_benchmark(sizes, replicas_list=DEFAULT_REPLICAS, capacity_factors=DEFAULT_CAPACITY_FACTORS, warmup=2,
                  repeats=15, threads=0, seed=SEED, paper_names=PAPER_MODELS, paper_assumptions=None, log=print):
    """Every replica count in its own child, then the paper model; returns the report."""
    check_sizes(sizes, replicas_list, capacity_factors)
    if repeats < 1 or warmup < 0:
        raise ValueError(f"--repeats must be >= 1 and --warmup >= 0, got {repeats} and {warmup}.")
    measured = {replicas: _worker_child(replicas, sizes, capacity_factors, warmup, repeats, threads, seed, log)
                for replicas in replicas_list}
    paper = paper_model(paper_names, **(paper_assumptions or {})) if paper_names else None
    return {"sizes": sizes, "replicas": list(replicas_list), "capacity_factors": list(capacity_factors),
            "warmup": warmup, "repeats": repeats, "seed": seed, "measured": measured, "paper": paper}


def _size(n):
    n = float(n)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def print_tables(report, log=print):
    sizes = report["sizes"]
    tokens = sizes["batch"] * sizes["seq_len"]
    log(f"1. step time (forward + backward + FactorizedAdam update), {tokens:,} tokens per global step, "
        f"median of {report['repeats']} interleaved steps after {report['warmup']} warm-up")
    rows = []
    for replicas, result in report["measured"].items():
        if result is None:
            rows.append([replicas, "FAILED (see above)"])
            continue
        for i, (label, r) in enumerate(result["models"].items()):
            exchange = r.get("exchange")
            rows.append([replicas if i == 0 else "", label, fmt(r["median_s"], ".3f"), fmt(r["min_s"], ".3f"),
                         fmt(r["vs_replicated"], ".2f") + "x", fmt(r["paired_ratio"], ".2f") + "x",
                         format(r["dropped_fraction"], ".2%") if "dropped_fraction" in r else "-",
                         exchange["capacity"] if exchange else "-", _size(exchange["sent_bytes"]) if exchange else "-"])
    log(harness.text_table([("R", 2), ("model", -24), ("median s", 9), ("min s", 8), ("median/repl.", 12),
                            ("paired ratio", 12), ("dropped", 8), ("capacity", 8), ("all-to-all/replica/step", 23)],
                           rows))
    log("")
    log("2. memory per replica (sums of the per-replica components of the variables; float32)")
    rows = []
    for replicas, result in report["measured"].items():
        if result is None:
            continue
        shown = [("replicated", result["models"]["replicated"])]
        parallel = [r for label, r in result["models"].items() if label != "replicated"]
        if parallel:
            shown.append(("expert-parallel", parallel[0]))
        base = result["models"]["replicated"]["memory"]
        for i, (label, r) in enumerate(shown):
            m = r["memory"]
            ratio = "" if label == "replicated" else f" (1/{base['experts'][0] / m['experts'][0]:g})"
            rows.append([replicas if i == 0 else "", label, _size(max(m["experts"])) + ratio,
                         _size(max(m["expert_state"])), _size(max(m["other"])), _size(max(m["other_state"])),
                         _size(m["all_reduced"]), format(m["all_reduced_experts"] / m["all_reduced"], ".1%"),
                         format(m["embedding"] / m["all_reduced"], ".1%")])
    log(harness.text_table([("R", 2), ("model", -16), ("expert vars", 12), ("expert state", 13), ("other vars", 11),
                            ("other state", 12), ("all-reduced/step", 17), ("experts in it", 13),
                            ("embedding in it", 15)], rows))
    paper = report.get("paper")
    if not paper:
        return
    a = paper["assumptions"]
    log("")
    log(f"3. on paper, per GPU and step: {a['tokens_per_gpu']:,} tokens per GPU, capacity factor "
        f"{a['capacity_factor']:g}, {a['gpus_per_node']} GPUs per node, NVLink {a['nvlink_GBps']:g} GB/s inside a "
        f"node, {a['network_Gbps']:g} Gb/s per GPU between nodes, {a['gpu_memory_GB']:g} GB per GPU")
    def cell(row, what):
        return f"{_size(row[what + '_bytes_per_gpu'])}, {row[what + '_s'] * 1e3:,.1f} ms"

    rows = [[row["model"], row["gpus"], row["mode"]] + ([f"skipped ({row['skipped']})"] if "skipped" in row else [
        f"{row['experts_per_gpu']:,}", _size(row["expert_weight_bytes"]), _size(row["held_bytes"]),
        "yes" if row["fits"] else "no", cell(row, "all_reduce"), cell(row, "embedding_all_gather"),
        cell(row, "all_to_all"), f"{row['communication_s'] * 1e3:,.1f}"]) for row in paper["rows"]]
    log(harness.text_table([("model", -12), ("GPUs", 4), ("mode", -15), ("experts/GPU", 11), ("expert weights", 14),
                            ("weights+grads+state", 19), ("fits", 4), ("all-reduce", 19), ("emb. all-gather", 19),
                            ("all-to-all", 19), ("comm. ms", 9)], rows))


NOTES = "What the figures can show and cannot, and how each column is counted: docs/benchmarks.md#moe-parallel."


def parse(argv):
    """The flags, the sizes they give, the replica counts, capacity factors and paper models."""
    p = harness.parser("moe-parallel", __doc__, 15, "timed steps per model, interleaved (default 15)")
    p.add_argument("--replicas", default=",".join(map(str, DEFAULT_REPLICAS)),
                   help="replica counts, each in its own child process (default 2,4)")
    p.add_argument("--capacity-factors", default=",".join(f"{c:g}" for c in DEFAULT_CAPACITY_FACTORS),
                   help="expert-parallel capacity factors timed beside the replicated model (default 1,2)")
    for key in FULL:
        flag = {"k": "-k"}.get(key, f"--{key.replace('_', '-')}")
        p.add_argument(flag, dest=key, type=int, help=f"default {FULL[key]} (--small {SMALL[key]})")
    p.add_argument("--small", action="store_true", help="smoke test sizes (explicit size flags still win)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first (default 2)")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (default 0: TensorFlow's choice)")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--paper-models", default=",".join(PAPER_MODELS),
                   help=f"models on paper (default {','.join(PAPER_MODELS)}; '' for none)")
    p.add_argument("--gpus", default=",".join(map(str, PAPER_DEFAULTS["gpus"])),
                   help="GPU counts on paper (default 8,64)")
    p.add_argument("--tokens-per-gpu", type=int, help=f"default {PAPER_DEFAULTS['tokens_per_gpu']:,} (Appendix C.1)")
    p.add_argument("--paper-capacity-factor", type=float, help=f"default {PAPER_DEFAULTS['capacity_factor']:g}")
    p.add_argument("--network-gbits", type=float,
                   help=f"gigabits/s per GPU between nodes (default {PAPER_DEFAULTS['network_Gbps']:g})")
    p.add_argument("--nvlink-gbytes", type=float,
                   help=f"gigabytes/s per GPU inside a node (default {PAPER_DEFAULTS['nvlink_GBps']:g})")
    args = p.parse_args(argv)
    sizes = dict(SMALL if args.small else FULL)
    for key in FULL:
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    replicas_list = [int(r) for r in args.replicas.split(",") if r.strip()]
    capacity_factors = [float(c) for c in args.capacity_factors.split(",") if c.strip()]
    paper_names = [n.strip() for n in args.paper_models.split(",") if n.strip()]
    check_sizes(sizes, replicas_list, capacity_factors)
    return args, sizes, replicas_list, capacity_factors, paper_names


def main(argv):
    args, sizes, replicas_list, capacity_factors, paper_names = parse(argv)
    out = harness.header("moe-parallel", argv)
    print(f"model: {PRESET} resized, LSTM {sizes['width']} / SparseMoE {sizes['experts']} experts of ReLU hidden "
          f"{sizes['hidden']}, k = {sizes['k']} / LSTM {sizes['width']}, vocabulary {sizes['vocabulary']:,} (full "
          f"softmax), FactorizedAdam (global_clipnorm 1), global batch {sizes['batch']} x {sizes['seq_len']} tokens, "
          f"MirroredStrategy on R logical CPU devices; seed {args.seed}")
    print(f"machine: {harness.machine_summary()}", flush=True)
    assumptions = {"gpus": tuple(int(g) for g in args.gpus.split(",") if g.strip()),
                   "tokens_per_gpu": args.tokens_per_gpu, "capacity_factor": args.paper_capacity_factor,
                   "network_Gbps": args.network_gbits, "nvlink_GBps": args.nvlink_gbytes}
    report = run_benchmark(sizes, replicas_list, capacity_factors, args.warmup, args.repeats, args.threads,
                           args.seed, paper_names, assumptions)
    print()
    print_tables(report)
    print()
    print(NOTES)
    print(f"load average at the end: {harness.load_average_text()}")
    return harness.report(args, {**out, **report, "measured": {str(r): v for r, v in report["measured"].items()}})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        harness.answer(worker, json.loads(sys.argv[2]))
    else:
        main(sys.argv[1:])
