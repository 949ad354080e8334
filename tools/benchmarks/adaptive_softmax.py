"""`zoo benchmark adaptive-softmax`: seconds and peak memory of one training step of `layers.AdaptiveSoftmax`
against `layers.FullSoftmax`, and against `torch.nn.AdaptiveLogSoftmaxWithLoss` when a Python with torch is given.
How it measures: docs/benchmarks.md#adaptive-softmax.
"""

import json
import os
import sys
import tempfile

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import zipf_targets
from zoo.tools.benchmarks.harness import PeakRSS, fmt, status_kib

TOKENS, HIDDEN, FACTOR, SEED = 1024, 512, 4, 0
VOCABULARIES = {  # name -> (label, vocabulary size, cutoffs)
    "wt103": ("WikiText-103", 267_735, [10_000, 20_000, 200_000]),
    "1bw": ("One Billion Word", 793_471, [10_000, 40_000, 200_000]),  # Table 1, gcnn-13 / gcnn-14b
    "small": ("small (smoke test)", 20_000, [2_000, 10_000]),
}
DEFAULT_REPEATS = {"adaptive": 5, "full": 3, "torch": 5}
MODEL_LABELS = {"adaptive": "ours AdaptiveSoftmax", "full": "ours FullSoftmax", "torch": "torch AdaptiveLogSoftmax"}
TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adaptive_softmax_torch.py")


def worker(spec):
    """In a child process: the models of `spec` built, then their steps timed (interleaved when
    several), each timed step's peak RSS growth measured: `{model: its results}`."""
    tf = harness.cpu_tensorflow(spec["threads"], spec.get("inter_threads", 0))
    import keras

    keras.utils.set_random_seed(SEED)
    memory = PeakRSS()
    try:
        tf.config.experimental.get_memory_info("CPU:0")
        tf_memory_info = "available"
    except (ValueError, RuntimeError) as e:
        tf_memory_info = f"{type(e).__name__}: {e}"
    inputs = [tf.constant(np.load(spec[key])) for key in ("hidden_file", "targets_file")]
    built = {model: _build(model, spec, inputs[0].shape) for model in spec["models"]}
    setup_rss_kib = status_kib("VmRSS")  # runtime, inputs and weights, before any step
    found = {m: {"warmup_s": [], "times_s": [], "step_peaks_kib": [], "tf_peak_bytes": []} for m in spec["models"]}

    def step(model, warm=False):
        if tf_memory_info == "available":
            tf.config.experimental.reset_memory_stats("CPU:0")
        memory.start()
        seconds, found[model]["loss"] = harness.timed(lambda: float(built[model][0](*inputs)[0]))  # read: finished
        peak, r = memory.stop(), found[model]
        r["warmup_s" if warm else "times_s"].append(seconds)
        if not warm:
            r["step_peaks_kib"].append(peak)
            if tf_memory_info == "available":
                r["tf_peak_bytes"].append(tf.config.experimental.get_memory_info("CPU:0")["peak"])

    for model in spec["models"]:
        for _ in range(spec["warmup"]):
            step(model, warm=True)
    harness.interleaved({m: (lambda m=m: step(m)) for m in spec["models"]}, max(spec["repeats"].values()),
                        skip=lambda m, r: r >= spec["repeats"][m])
    return {m: {"model": MODEL_LABELS[m], "library": harness.versions(),
                "threads": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_threads": tf.config.threading.get_inter_op_parallelism_threads(),
                "params": built[m][1]["params"], "loss": r.get("loss"), **harness.summary(r["times_s"], r["warmup_s"]),
                "setup_rss_mib": setup_rss_kib / 1024, "weights_rss_mib": built[m][1]["weights_rss_mib"],
                "step_peak_mib": max(r["step_peaks_kib"]) / 1024 if r["step_peaks_kib"] else None,
                "tf_peak_mib": max(r["tf_peak_bytes"]) / 2**20 if r["tf_peak_bytes"] else None,
                "process_peak_mib": memory.process_peak_kib / 1024, "memory_method": memory.method,
                "tf_get_memory_info_cpu": tf_memory_info} for m, r in found.items()}


def _build(model, spec, hidden_shape):
    """The model's training step (a tf.function of hidden states and targets: the mean NLL and its
    gradients w.r.t. the weights and the hidden states), and its parameters and the RSS its weights took."""
    import tensorflow as tf
    from keras import ops

    from zoo.layers.adaptive_softmax import AdaptiveSoftmax
    from zoo.layers.softmax import FullSoftmax

    before = status_kib("VmRSS")
    layer = (AdaptiveSoftmax(spec["vocabulary_size"], spec["cutoffs"], factor=FACTOR) if model == "adaptive"
             else FullSoftmax(spec["vocabulary_size"]))
    layer.build(hidden_shape)

    @tf.function
    def step(h, t):
        with tf.GradientTape() as tape:
            tape.watch(h)
            loss = ops.mean(layer.loss(h, t))
        return loss, tape.gradient(loss, layer.trainable_variables + [h])

    return step, {"params": int(layer.count_params()), "weights_rss_mib": (status_kib("VmRSS") - before) / 1024}


def _child(vocab, models, args, hidden_file, targets_file):
    """The answer of the child that measures `models` (["torch"]: adaptive_softmax_torch.py) on `vocab`,
    or None for each after saying why it failed (the other models still run)."""
    label, size, cutoffs = VOCABULARIES[vocab]
    spec = {"vocabulary_size": size, "cutoffs": cutoffs, "factor": FACTOR, "seed": SEED, "models": models,
            "threads": args.threads, "inter_threads": args.inter_threads, "warmup": 1,
            "repeats": {m: args.repeats or DEFAULT_REPEATS[m] for m in models},
            "hidden_file": hidden_file, "targets_file": targets_file}
    # __spec__.name: this module's importable name, also when it runs as `python -m`
    command = [args.torch_python, TORCH_SCRIPT] if models == ["torch"] else [sys.executable, "-m", __spec__.name]
    try:
        return harness.run_once(command + ["--worker", json.dumps(spec)],
                                f"{label} / {' + '.join(MODEL_LABELS[m] for m in models)}")
    except RuntimeError as e:
        print(f"  FAILED: {e}", flush=True)
        return {m: None for m in models}


def _ratio(a, b):
    return a["median_s"] / b["median_s"] if a and b and a.get("median_s") and b.get("median_s") else None


def parse(argv):
    p = harness.parser("adaptive-softmax", __doc__, "",
                       "timed steps after 1 warm-up step (default: 5 adaptive, 3 full, 5 torch)")
    p.add_argument("--vocab", choices=["wt103", "1bw", "both"], default="both")
    p.add_argument("--small", action="store_true",
                   help="smoke test: vocabulary 20,000, cutoffs 2000/10000 (overrides --vocab)")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="TF intra-op threads and torch.set_num_threads (default: os.cpu_count())")
    p.add_argument("--inter-threads", type=int, default=0,
                   help="TF inter-op threads (default 0: TensorFlow's own choice)")
    p.add_argument("--isolation", choices=["process", "vocabulary"], default="process",
                   help="'process': a fresh process per (vocabulary, model) (default; honest peak memory); "
                        "'vocabulary': both TF models of a vocabulary in one process, timed steps interleaved")
    p.add_argument("--torch-python", default=os.environ.get("ZOO_TORCH_PYTHON"),
                   help="a Python with torch installed (default: $ZOO_TORCH_PYTHON; torch skipped if unset)")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats", "threads")
    if args.torch_python and not (os.path.isfile(args.torch_python) and os.access(args.torch_python, os.X_OK)):
        raise ValueError(f"--torch-python {args.torch_python!r} is not an executable file.")
    return args


def main(argv):
    args = parse(argv)
    vocabs = ["small"] if args.small else ["wt103", "1bw"] if args.vocab == "both" else [args.vocab]
    report = harness.header("adaptive-softmax", argv, tokens=TOKENS, hidden=HIDDEN, factor=FACTOR, seed=SEED,
                            threads=args.threads, inter_threads=args.inter_threads, isolation=args.isolation,
                            vocabularies={})
    print(f"adaptive-softmax: a training step of {TOKENS} tokens, hidden {HIDDEN}, factor {FACTOR}, Zipf targets, "
          f"seed {SEED}\nmachine: {harness.machine_summary()}; threads: {args.threads} (TF intra-op, torch), "
          f"TF inter-op {args.inter_threads or 'default'}; CPU\n"
          f"repeats: 1 warm-up step, then {args.repeats or 'adaptive 5 / full 3 / torch 5'} timed steps; "
          f"isolation: {args.isolation}")
    if not args.torch_python:
        print("torch: skipped (give --torch-python PATH or set ZOO_TORCH_PYTHON)")
    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as work:
        for vocab in vocabs:
            report["vocabularies"][vocab] = _measure(work, vocab, args)
    found = [r for vocab in report["vocabularies"].values() for r in vocab["results"].values() if r]
    report.update({key: r[key] for r in found for key in ["tf_get_memory_info_cpu"] if key in r})
    print()
    _print_table(report)
    info = report.get("tf_get_memory_info_cpu", "?")
    print(f"\nstep peak measured by {'; '.join(sorted({r['memory_method'] for r in found}))}"
          + ("" if info == "available" else f"; tf.config.experimental.get_memory_info('CPU:0') fails here: {info}")
          + "\nWhat each column means: docs/benchmarks.md#adaptive-softmax")
    return harness.report(args, report)


def _measure(work, vocab, args):
    """Every model of one vocabulary, each in its child process (or the TF models in one)."""
    label, size, cutoffs = VOCABULARIES[vocab]
    targets = zipf_targets(size, TOKENS)
    files = [os.path.join(work, f"{vocab}-{name}.npy") for name in ("hidden", "targets")]
    np.save(files[0], np.random.default_rng(SEED + 1).standard_normal((TOKENS, HIDDEN), dtype=np.float32))
    np.save(files[1], targets)
    print(f"running {label}: vocabulary {size:,}, cutoffs {'/'.join(map(str, cutoffs))} ...", flush=True)
    groups, results = [["adaptive"], ["full"]] if args.isolation == "process" else [["adaptive", "full"]], {}
    for models in groups + ([["torch"]] if args.torch_python else []):
        results.update(_child(vocab, models, args, *files))
    return {"label": label, "vocabulary_size": size, "cutoffs": cutoffs,
            "targets_in_head": float(np.mean(targets < cutoffs[0])), "results": results,
            "full_over_adaptive": _ratio(results.get("full"), results.get("adaptive")),
            "ours_over_torch": _ratio(results.get("adaptive"), results.get("torch"))}


def _print_table(report):
    rows = []
    for vocab in report["vocabularies"].values():
        for i, (name, r) in enumerate(vocab["results"].items()):
            first = vocab["label"] if i == 0 else f"V={vocab['vocabulary_size']:,}" if i == 1 else ""
            rows.append([first, MODEL_LABELS[name]] + (["FAILED (see above)"] if r is None else [
                f"{r['params']:,d}", fmt(r["median_s"], ".4f"), fmt(r["min_s"], ".4f"), len(r["times_s"]),
                fmt(r["setup_rss_mib"], ",.1f"), fmt(r["step_peak_mib"], ",.1f"), fmt(r["process_peak_mib"], ",.1f")]))
        ratios = f"full/adaptive {fmt(vocab['full_over_adaptive'], '.2f')}x"
        if "torch" in vocab["results"]:
            ratios += f", ours/torch {fmt(vocab['ours_over_torch'], '.2f')}x"
        rows.append(["", "ratio of medians:", ratios])
    print(harness.text_table([("vocabulary", -26), ("model", -26), ("params", 12), ("median s", 9), ("min s", 9),
                              ("steps", 5), ("RSS before MiB", 14), ("step peak MiB", 13), ("process peak MiB", 16)],
                             rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        harness.answer(worker, json.loads(sys.argv[2]))
    else:
        main(sys.argv[1:])
