"""`zoo benchmark adaptive-softmax`: seconds and peak memory of one training step (forward +
backward of the mean negative log-likelihood, gradients w.r.t. the layer's weights and its hidden
input) of `layers.AdaptiveSoftmax` against `layers.FullSoftmax`, and against
`torch.nn.AdaptiveLogSoftmaxWithLoss` when a Python with torch is given (torch is not a
dependency of the zoo: adaptive_softmax_torch.py, beside this module, runs under that other Python).

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

TOKENS = 1024
HIDDEN = 512
FACTOR = 4
SEED = 0

# name -> (label, vocabulary size, cutoffs)
VOCABULARIES = {
    "wt103": ("WikiText-103", 267_735, [10_000, 20_000, 200_000]),
    "1bw": ("One Billion Word", 793_471, [10_000, 40_000, 200_000]),  # Table 1, gcnn-13 / gcnn-14b
    "small": ("small (smoke test)", 20_000, [2_000, 10_000]),
}
DEFAULT_REPEATS = {"adaptive": 5, "full": 3, "torch": 5}
MODEL_LABELS = {"adaptive": "ours AdaptiveSoftmax", "full": "ours FullSoftmax", "torch": "torch AdaptiveLogSoftmax"}
TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adaptive_softmax_torch.py")


# ---- inputs ---------------------------------------------------------------------------------
def hidden_states(tokens=TOKENS, hidden=HIDDEN, seed=SEED):
    return np.random.default_rng(seed + 1).standard_normal((tokens, hidden), dtype=np.float32)


# ---- the child process: one or more TF models of one vocabulary ------------------------------
def worker(spec):
    """Runs in a child process: builds the models named in the spec, times their steps and
    measures each step's peak RSS growth; returns the results (the child's answer)."""
    tf = harness.cpu_tensorflow(spec["threads"], spec.get("inter_threads"))
    import keras

    keras.utils.set_random_seed(SEED)
    memory = PeakRSS()
    tf_memory_info = None
    try:
        tf.config.experimental.get_memory_info("CPU:0")
        tf_memory_info = "available"
    except (ValueError, RuntimeError) as e:
        tf_memory_info = f"{type(e).__name__}: {e}"

    hidden = tf.constant(np.load(spec["hidden_file"]))
    targets = tf.constant(np.load(spec["targets_file"]))
    steps, setup = {}, {}
    for model in spec["models"]:
        steps[model], setup[model] = _build(model, spec, hidden.shape)
    setup_rss_kib = status_kib("VmRSS")  # runtime, inputs and weights, before any step
    results = _run_steps(spec, steps, (hidden, targets), memory, tf_memory_info == "available")
    return {model: _summary(model, r, setup[model], setup_rss_kib, memory, tf_memory_info)
            for model, r in results.items()}


def _build(model, spec, hidden_shape):
    """The model's training step (a tf.function of hidden states and targets) and what building it
    cost: its parameters and the RSS its weights took."""
    import tensorflow as tf
    from keras import ops

    from zoo.layers.adaptive_softmax import AdaptiveSoftmax
    from zoo.layers.softmax import FullSoftmax

    before = status_kib("VmRSS")
    if model == "adaptive":
        layer = AdaptiveSoftmax(spec["vocabulary_size"], spec["cutoffs"], factor=FACTOR)
    else:
        layer = FullSoftmax(spec["vocabulary_size"])
    layer.build(hidden_shape)

    @tf.function
    def step(h, t):
        with tf.GradientTape() as tape:
            tape.watch(h)
            loss = ops.mean(layer.loss(h, t))
        grads = tape.gradient(loss, layer.trainable_variables + [h])
        return loss, grads

    return step, {"params": int(layer.count_params()), "weights_rss_mib": (status_kib("VmRSS") - before) / 1024}


def _run_steps(spec, steps, inputs, memory, tf_stats):
    """Warm-up steps, then the timed steps of every model, interleaved by the harness when several
    share this process; each timed step's seconds and peak RSS growth (and TF's peak, if any)."""
    import tensorflow as tf

    results = {m: {"warmup_s": [], "times_s": [], "step_peaks_kib": [], "tf_peak_bytes": []} for m in spec["models"]}

    def timed(model, warm):
        if tf_stats:
            tf.config.experimental.reset_memory_stats("CPU:0")
        memory.start()
        elapsed, loss = harness.timed(lambda: float(steps[model](*inputs)[0]))  # finished once its outputs exist
        peak = memory.stop()
        r = results[model]
        r["loss"] = loss
        if warm:
            r["warmup_s"].append(elapsed)
        else:
            r["times_s"].append(elapsed)
            r["step_peaks_kib"].append(peak)
            if tf_stats:
                r["tf_peak_bytes"].append(tf.config.experimental.get_memory_info("CPU:0")["peak"])

    for model in spec["models"]:
        for _ in range(spec["warmup"]):
            timed(model, warm=True)
    harness.interleaved({m: (lambda m=m: timed(m, warm=False)) for m in spec["models"]},
                        max(spec["repeats"].values()), skip=lambda m, r: r >= spec["repeats"][m])
    return results


def _summary(model, r, setup, setup_rss_kib, memory, tf_memory_info):
    import keras
    import tensorflow as tf

    return {
        "model": MODEL_LABELS[model],
        "library": f"tensorflow {tf.__version__}, keras {keras.__version__}",
        "threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "params": setup["params"],
        "loss": r.get("loss"),
        **harness.summary(r["times_s"], r["warmup_s"]),
        "setup_rss_mib": setup_rss_kib / 1024,
        "weights_rss_mib": setup["weights_rss_mib"],
        "step_peak_mib": max(r["step_peaks_kib"]) / 1024 if r["step_peaks_kib"] else None,
        "tf_peak_mib": max(r["tf_peak_bytes"]) / 2**20 if r["tf_peak_bytes"] else None,
        "process_peak_mib": memory.process_peak_kib / 1024,
        "memory_method": memory.method,
        "tf_get_memory_info_cpu": tf_memory_info,
    }


# ---- the parent: run the children and print the table ----------------------------------------
def _tf_child(work, vocab, models, args, hidden_file, targets_file):
    label, size, cutoffs = VOCABULARIES[vocab]
    spec = {
        "vocabulary_size": size, "cutoffs": cutoffs, "models": models, "threads": args.threads,
        "inter_threads": args.inter_threads, "warmup": 1,
        "repeats": {m: args.repeats or DEFAULT_REPEATS[m] for m in models},
        "hidden_file": hidden_file, "targets_file": targets_file,
    }
    # __spec__.name: this module's importable name, also when it runs as `python -m`
    return _child([sys.executable, "-m", __spec__.name, "--worker", json.dumps(spec)],
                  f"{label} / {' + '.join(MODEL_LABELS[m] for m in models)}") or {m: None for m in models}


def _child(command, what):
    """The child's answer, or None after saying why it failed (the other models still run)."""
    try:
        return harness.run_once(command, what)
    except RuntimeError as e:
        print(f"  FAILED: {e}", flush=True)
        return None


def _torch_child(work, vocab, args, hidden_file, targets_file):
    label, size, cutoffs = VOCABULARIES[vocab]
    command = [args.torch_python, TORCH_SCRIPT, "--vocabulary-size", str(size),
               "--cutoffs", ",".join(map(str, cutoffs)), "--div-value", str(float(FACTOR)),
               "--hidden-file", hidden_file, "--targets-file", targets_file, "--threads", str(args.threads),
               "--warmup", "1", "--repeats", str(args.repeats or DEFAULT_REPEATS["torch"]), "--seed", str(SEED)]
    return _child(command, f"{label} / {MODEL_LABELS['torch']}")


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
                        "'vocabulary': both TF models of a vocabulary in one process, timed steps "
                        "interleaved (side-by-side timing; the second model's peak may be understated)")
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
    _print_header(args)
    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as work:
        for vocab in vocabs:
            report["vocabularies"][vocab] = _measure(work, vocab, args)
    memory_notes = set()
    for vocab in report["vocabularies"].values():
        for r in vocab["results"].values():
            if r:
                memory_notes.add(r["memory_method"])
                if r.get("tf_get_memory_info_cpu"):
                    report["tf_get_memory_info_cpu"] = r["tf_get_memory_info_cpu"]
    print()
    _print_table(report)
    print()
    _print_notes(report, memory_notes)
    return harness.report(args, report)


def _print_header(args):
    print(f"adaptive-softmax: forward + backward (gradients w.r.t. the weights and the hidden input) of the "
          f"mean NLL; {TOKENS} tokens/step, hidden {HIDDEN}, factor (div_value) {FACTOR}, Zipf targets "
          f"P(id=r) ~ 1/(r+1), numpy seed {SEED}")
    print(f"machine: {harness.machine_summary()}; threads: TF intra-op "
          f"{args.threads}, TF inter-op {args.inter_threads or 'default'}, torch.set_num_threads({args.threads}); "
          f"device: CPU")
    isolation = ("one process per (vocabulary, model)" if args.isolation == "process"
                 else "one process per vocabulary, timed steps interleaved")
    print(f"repeats: 1 warm-up step, then {args.repeats or 'adaptive 5 / full 3 / torch 5'} timed steps; "
          f"isolation: {isolation}")
    if not args.torch_python:
        print("torch: skipped (give --torch-python PATH or set ZOO_TORCH_PYTHON)")
    print(flush=True)


def _measure(work, vocab, args):
    """Every model of one vocabulary, each in its child process (or the TF models in one)."""
    label, size, cutoffs = VOCABULARIES[vocab]
    targets = zipf_targets(size, TOKENS)
    hidden_file, targets_file = os.path.join(work, f"{vocab}-hidden.npy"), os.path.join(work, f"{vocab}-targets.npy")
    np.save(hidden_file, hidden_states())
    np.save(targets_file, targets)
    print(f"running {label}: vocabulary {size:,}, cutoffs {'/'.join(map(str, cutoffs))} ...", flush=True)
    if args.isolation == "process":
        results = {}
        for model in ("adaptive", "full"):
            results.update(_tf_child(work, vocab, [model], args, hidden_file, targets_file))
    else:
        results = _tf_child(work, vocab, ["adaptive", "full"], args, hidden_file, targets_file)
    if args.torch_python:
        results["torch"] = _torch_child(work, vocab, args, hidden_file, targets_file)
    return {
        "label": label, "vocabulary_size": size, "cutoffs": cutoffs,
        "targets_in_head": float(np.mean(targets < cutoffs[0])),
        "results": results,
        "full_over_adaptive": _ratio(results.get("full"), results.get("adaptive")),
        "ours_over_torch": _ratio(results.get("adaptive"), results.get("torch")),
    }


def _print_notes(report, memory_notes):
    info = report.get("tf_get_memory_info_cpu", "?")
    print("memory: 'RSS before' = the child's RSS once its runtime, inputs and weights exist, before any step; "
          "'step peak' = peak RSS growth during a timed step (max over the timed steps), measured by "
          + "; ".join(sorted(memory_notes)) + "; 'process peak' = the child process's peak RSS (VmHWM), "
          "including the Python/TF runtime, weights and inputs.")
    if info != "available":
        print(f"  (tf.config.experimental.get_memory_info('CPU:0') does not work on CPU here: {info})")
    print("ratios: full/adaptive and ours/torch are ratios of median seconds per step (ours/torch < 1: ours faster).")


def _print_table(report):
    rows = []
    for vocab in report["vocabularies"].values():
        for i, (name, r) in enumerate(vocab["results"].items()):
            first = [vocab["label"] if i == 0 else f"V={vocab['vocabulary_size']:,}" if i == 1 else "", MODEL_LABELS[name]]
            rows.append(first + (["FAILED (see above)"] if r is None else [
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
