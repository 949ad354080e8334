"""Benchmarks behind `zoo benchmark NAME [args...]` (installed as `zoo.tools.benchmarks`).

    zoo benchmark adaptive-softmax [--vocab wt103|1bw|both] [--repeats N] [--threads N]
                                   [--torch-python PATH] [--json PATH] [--small]
    zoo benchmark ptb-softmax [--steps N] [--cutoffs 2000,6000]   (see bench_ptb_softmax.py)
    zoo benchmark moe-ptb [--steps N]                              (see bench_moe_ptb.py)
    zoo benchmark moe [--experts 4,32,256] [--tokens N] [--repeats N] [--small] [--json PATH]
                                                                   (see bench_moe.py)
    zoo benchmark optimizer-memory [--experts N] [--repeats N] [--small] [--json PATH]
                                                                   (see bench_optimizer_memory.py)
    zoo benchmark moe-parallel [--replicas 2,4] [--capacity-factors 1,2] [--repeats N] [--small]
                               [--json PATH]                       (see bench_moe_parallel.py)
    zoo benchmark raw-text --data DIR [--preset P] [--vocabulary-size N] [--repeats N] [--small]
                                                                   (see bench_raw_text.py)

adaptive-softmax: seconds and peak memory of one training step (forward + backward of the mean
negative log-likelihood, gradients w.r.t. the layer's weights and its hidden input) of
`layers.AdaptiveSoftmax` against `layers.FullSoftmax`, and against
`torch.nn.AdaptiveLogSoftmaxWithLoss` when a Python with torch is given (torch is not a
dependency of the zoo: tools/bench_torch_adaptive.py runs under that other Python).

Every (vocabulary, model) configuration runs in a fresh child process, so that one model's peak
memory cannot hide another's; `--isolation vocabulary` instead runs both TF models of a
vocabulary in one process with their timed steps interleaved. This module imports neither
TensorFlow nor Keras itself; only the children do.
"""

import argparse
import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

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
TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_torch_adaptive.py")


# ---- inputs ---------------------------------------------------------------------------------
def zipf_targets(vocabulary_size, count, seed=SEED):
    """`count` ids in [0, vocabulary_size) with P(id = r) proportional to 1 / (r + 1): the
    rank-frequency law of words, truncated to the vocabulary (id 0 the most frequent)."""
    if vocabulary_size < 1:
        raise ValueError(f"vocabulary_size must be >= 1, got {vocabulary_size}.")
    cdf = np.cumsum(1.0 / np.arange(1, vocabulary_size + 1, dtype=np.float64))
    cdf /= cdf[-1]
    ids = np.searchsorted(cdf, np.random.default_rng(seed).random(count), side="right")
    return np.minimum(ids, vocabulary_size - 1).astype(np.int32)


def hidden_states(tokens=TOKENS, hidden=HIDDEN, seed=SEED):
    return np.random.default_rng(seed + 1).standard_normal((tokens, hidden), dtype=np.float32)


# ---- peak memory ----------------------------------------------------------------------------
def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


class PeakRSS:
    """Peak resident-set growth over a region (a step). Preferred: the kernel's high-water mark
    VmHWM, reset to the current RSS by writing 5 to /proc/self/clear_refs (Linux >= 4.0), so
    the peak is exact. Fallback: a thread sampling VmRSS every millisecond."""

    def __init__(self):
        self.process_peak_kib = _status_kib("VmHWM")
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.method = "VmHWM reset through /proc/self/clear_refs before each step"
        except OSError:
            self.method = "VmRSS sampled every 1 ms by a background thread"
        self._stop = None

    def start(self):
        self.process_peak_kib = max(self.process_peak_kib, _status_kib("VmHWM"))
        if self.method.startswith("VmHWM"):
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.base_kib = _status_kib("VmRSS")
        else:
            self.base_kib = self._max = _status_kib("VmRSS")
            self._stop = threading.Event()

            def sample():
                while not self._stop.is_set():
                    self._max = max(self._max, _status_kib("VmRSS"))
                    time.sleep(0.001)

            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()

    def stop(self):
        """Peak RSS growth since `start`, in KiB."""
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._stop = None
            peak = max(self._max, _status_kib("VmRSS"))
        else:
            peak = _status_kib("VmHWM")
        self.process_peak_kib = max(self.process_peak_kib, peak)
        return peak - self.base_kib


# ---- the child process: one or more TF models of one vocabulary ------------------------------
def worker(spec_path):
    """Runs in a child process: builds the models named in the spec, times their steps and
    measures each step's peak RSS growth; writes the results as JSON next to the spec."""
    with open(spec_path) as f:
        spec = json.load(f)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")  # a CPU benchmark, like the torch side
    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    if spec.get("inter_threads"):
        tf.config.threading.set_inter_op_parallelism_threads(spec["inter_threads"])
    import keras
    from keras import ops

    from zoo.layers.adaptive_softmax import AdaptiveSoftmax
    from zoo.layers.softmax import FullSoftmax

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
    setup = {}
    steps = {}
    for model in spec["models"]:
        before = _status_kib("VmRSS")
        if model == "adaptive":
            layer = AdaptiveSoftmax(spec["vocabulary_size"], spec["cutoffs"], factor=FACTOR)
        else:
            layer = FullSoftmax(spec["vocabulary_size"])
        layer.build(hidden.shape)

        def make_step(layer):
            @tf.function
            def step(h, t):
                with tf.GradientTape() as tape:
                    tape.watch(h)
                    loss = ops.mean(layer.loss(h, t))
                grads = tape.gradient(loss, layer.trainable_variables + [h])
                return loss, grads

            return step

        steps[model] = (layer, make_step(layer))
        setup[model] = {"params": int(layer.count_params()), "weights_rss_mib": (_status_kib("VmRSS") - before) / 1024}

    setup_rss_kib = _status_kib("VmRSS")  # runtime, inputs and weights, before any step
    results = {m: {"warmup_s": [], "times_s": [], "step_peaks_kib": [], "tf_peak_bytes": []} for m in spec["models"]}

    def timed(model, warm):
        _, step = steps[model]
        tf_stats = tf_memory_info == "available"
        if tf_stats:
            tf.config.experimental.reset_memory_stats("CPU:0")
        memory.start()
        start = time.perf_counter()
        loss, grads = step(hidden, targets)
        loss = float(loss)  # the step has finished once its outputs exist (CPU)
        elapsed = time.perf_counter() - start
        del grads
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
    # Timed steps, interleaved round-robin when several models share this process.
    pending = {m: spec["repeats"][m] for m in spec["models"]}
    while any(pending.values()):
        for model in spec["models"]:
            if pending[model]:
                timed(model, warm=False)
                pending[model] -= 1

    out = {}
    for model, r in results.items():
        times = r["times_s"]
        out[model] = {
            "model": MODEL_LABELS[model],
            "library": f"tensorflow {tf.__version__}, keras {keras.__version__}",
            "threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "params": setup[model]["params"],
            "loss": r.get("loss"),
            "warmup_s": r["warmup_s"],
            "times_s": times,
            "median_s": statistics.median(times) if times else None,
            "min_s": min(times) if times else None,
            "setup_rss_mib": setup_rss_kib / 1024,
            "weights_rss_mib": setup[model]["weights_rss_mib"],
            "step_peak_mib": max(r["step_peaks_kib"]) / 1024 if r["step_peaks_kib"] else None,
            "tf_peak_mib": max(r["tf_peak_bytes"]) / 2**20 if r["tf_peak_bytes"] else None,
            "process_peak_mib": memory.process_peak_kib / 1024,
            "memory_method": memory.method,
            "tf_get_memory_info_cpu": tf_memory_info,
        }
    with open(spec["result_file"], "w") as f:
        json.dump(out, f, indent=1)


# ---- the parent: run the children and print the table ----------------------------------------
def _child_env():
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    spec = importlib.util.find_spec("zoo")  # the zoo this process runs (a checkout or the install)
    if spec is not None and spec.submodule_search_locations:
        root = os.path.dirname(list(spec.submodule_search_locations)[0])
        env["PYTHONPATH"] = os.pathsep.join(p for p in [root, env.get("PYTHONPATH")] if p)
    return env


def _run_child(command, result_file, what):
    start = time.perf_counter()
    proc = subprocess.run(command, env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not os.path.exists(result_file):
        reason = f"exit status {proc.returncode}"
        if proc.returncode in (-9, 137):
            reason += " (killed: out of memory?)"
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        print(f"  {what}: FAILED, {reason}\n" + "\n".join("    | " + line for line in tail.splitlines()), flush=True)
        return None
    with open(result_file) as f:
        result = json.load(f)
    return result, wall


def _tf_child(work, vocab, models, args, hidden_file, targets_file):
    label, size, cutoffs = VOCABULARIES[vocab]
    tag = f"{vocab}-{'-'.join(models)}"
    spec = {
        "vocabulary_size": size, "cutoffs": cutoffs, "models": models, "threads": args.threads,
        "inter_threads": args.inter_threads, "warmup": 1,
        "repeats": {m: args.repeats or DEFAULT_REPEATS[m] for m in models},
        "hidden_file": hidden_file, "targets_file": targets_file,
        "result_file": os.path.join(work, f"{tag}.result.json"),
    }
    spec_path = os.path.join(work, f"{tag}.spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('zoo_benchmarks_worker', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m.worker(sys.argv[2])")
    out = _run_child([sys.executable, "-c", code, os.path.abspath(__file__), spec_path], spec["result_file"],
                     f"{label} / {' + '.join(MODEL_LABELS[m] for m in models)}")
    return out[0] if out else {m: None for m in models}


def _torch_child(work, vocab, args, hidden_file, targets_file):
    label, size, cutoffs = VOCABULARIES[vocab]
    result_file = os.path.join(work, f"{vocab}-torch.result.json")
    command = [args.torch_python, TORCH_SCRIPT, "--vocabulary-size", str(size),
               "--cutoffs", ",".join(map(str, cutoffs)), "--div-value", str(float(FACTOR)),
               "--hidden-file", hidden_file, "--targets-file", targets_file, "--threads", str(args.threads),
               "--warmup", "1", "--repeats", str(args.repeats or DEFAULT_REPEATS["torch"]), "--seed", str(SEED),
               "--json-out", result_file]
    out = _run_child(command, result_file, f"{label} / {MODEL_LABELS['torch']}")
    return out[0] if out else None


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def _ratio(a, b):
    return a["median_s"] / b["median_s"] if a and b and a.get("median_s") and b.get("median_s") else None


def adaptive_softmax(argv):
    p = argparse.ArgumentParser(
        prog="zoo benchmark adaptive-softmax",
        description="Seconds and peak memory of a forward + backward step of the adaptive softmax "
                    "against the full softmax (and torch's AdaptiveLogSoftmaxWithLoss).")
    p.add_argument("--vocab", choices=["wt103", "1bw", "both"], default="both")
    p.add_argument("--small", action="store_true",
                   help="smoke test: vocabulary 20,000, cutoffs 2000/10000 (overrides --vocab)")
    p.add_argument("--repeats", type=int, help="timed steps after 1 warm-up step "
                   "(default: 5 adaptive, 3 full, 5 torch)")
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
    p.add_argument("--json", metavar="PATH", help="also write the results here")
    args = p.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}.")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}.")
    if args.torch_python and not (os.path.isfile(args.torch_python) and os.access(args.torch_python, os.X_OK)):
        raise ValueError(f"--torch-python {args.torch_python!r} is not an executable file.")
    vocabs = ["small"] if args.small else ["wt103", "1bw"] if args.vocab == "both" else [args.vocab]

    command_line = shlex.join(getattr(sys, "orig_argv", sys.argv))
    print(f"$ {command_line}")
    print(f"adaptive-softmax: forward + backward (gradients w.r.t. the weights and the hidden input) of the "
          f"mean NLL; {TOKENS} tokens/step, hidden {HIDDEN}, factor (div_value) {FACTOR}, Zipf targets "
          f"P(id=r) ~ 1/(r+1), numpy seed {SEED}")
    print(f"machine: {platform.machine()} {_cpu_model()}, os.cpu_count() = {os.cpu_count()}; threads: TF intra-op "
          f"{args.threads}, TF inter-op {args.inter_threads or 'default'}, torch.set_num_threads({args.threads}); "
          f"device: CPU")
    print(f"repeats: 1 warm-up step, then {args.repeats or 'adaptive 5 / full 3 / torch 5'} timed steps; "
          f"isolation: {'one process per (vocabulary, model)' if args.isolation == 'process' else 'one process per vocabulary, timed steps interleaved'}")
    if not args.torch_python:
        print("torch: skipped (give --torch-python PATH or set ZOO_TORCH_PYTHON)")
    print(flush=True)

    report = {"command": command_line, "benchmark": "adaptive-softmax", "tokens": TOKENS, "hidden": HIDDEN,
              "factor": FACTOR, "seed": SEED, "threads": args.threads, "inter_threads": args.inter_threads,
              "isolation": args.isolation, "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "vocabularies": {}}
    memory_notes = set()
    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as work:
        for vocab in vocabs:
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
            for r in results.values():
                if r:
                    memory_notes.add(r["memory_method"])
                    if r.get("tf_get_memory_info_cpu"):
                        report["tf_get_memory_info_cpu"] = r["tf_get_memory_info_cpu"]
            report["vocabularies"][vocab] = {
                "label": label, "vocabulary_size": size, "cutoffs": cutoffs,
                "targets_in_head": float(np.mean(targets < cutoffs[0])),
                "results": results,
                "full_over_adaptive": _ratio(results.get("full"), results.get("adaptive")),
                "ours_over_torch": _ratio(results.get("adaptive"), results.get("torch")),
            }
    print()
    _print_table(report)
    print()
    info = report.get("tf_get_memory_info_cpu", "?")
    print("memory: 'RSS before' = the child's RSS once its runtime, inputs and weights exist, before any step; "
          "'step peak' = peak RSS growth during a timed step (max over the timed steps), measured by "
          + "; ".join(sorted(memory_notes)) + "; 'process peak' = the child process's peak RSS (VmHWM), "
          "including the Python/TF runtime, weights and inputs.")
    if info != "available":
        print(f"  (tf.config.experimental.get_memory_info('CPU:0') does not work on CPU here: {info})")
    print("ratios: full/adaptive and ours/torch are ratios of median seconds per step (ours/torch < 1: ours faster).")
    write_results(args.json, report)
    return report


def write_results(path, out):
    """Writes a benchmark's results to `path` as JSON (if a path was given) and says where."""
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        print(f"results written to {path}")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _print_table(report):
    header = (f"{'vocabulary':<26} {'model':<26} {'params':>12} {'median s':>9} {'min s':>9} {'steps':>5} "
              f"{'RSS before MiB':>14} {'step peak MiB':>13} {'process peak MiB':>16}")
    print(header)
    print("-" * len(header))
    for vocab in report["vocabularies"].values():
        first = f"{vocab['label']}"
        second = f"V={vocab['vocabulary_size']:,}"
        rows = [(name, r) for name, r in vocab["results"].items()]
        for i, (name, r) in enumerate(rows):
            col = first if i == 0 else second if i == 1 else ""
            if r is None:
                print(f"{col:<26} {MODEL_LABELS[name]:<26} {'FAILED (see above)':>12}")
                continue
            print(f"{col:<26} {MODEL_LABELS[name]:<26} {r['params']:>12,d} {_fmt(r['median_s'], '.4f'):>9} "
                  f"{_fmt(r['min_s'], '.4f'):>9} {len(r['times_s']):>5} {_fmt(r['setup_rss_mib'], ',.1f'):>14} "
                  f"{_fmt(r['step_peak_mib'], ',.1f'):>13} "
                  f"{_fmt(r['process_peak_mib'], ',.1f'):>16}")
        ratios = f"full/adaptive {_fmt(vocab['full_over_adaptive'], '.2f')}x"
        if "torch" in vocab["results"]:
            ratios += f", ours/torch {_fmt(vocab['ours_over_torch'], '.2f')}x"
        print(f"{'':<26} {'ratio of medians:':<26} {ratios}")


def ptb_softmax(argv):

    from zoo.tools import bench_ptb_softmax


    return bench_ptb_softmax.ptb_softmax(argv)


def moe_ptb(argv):

    from zoo.tools import bench_moe_ptb


    return bench_moe_ptb.moe_ptb(argv)


def moe(argv):

    from zoo.tools import bench_moe


    return bench_moe.moe(argv)


def optimizer_memory(argv):

    from zoo.tools import bench_optimizer_memory


    return bench_optimizer_memory.optimizer_memory(argv)


def moe_parallel(argv):

    from zoo.tools import bench_moe_parallel


    return bench_moe_parallel.moe_parallel(argv)


def serving(argv):

    from zoo.tools import bench_serving


    return bench_serving.serving(argv)


def input_pipeline(argv):

    from zoo.tools import bench_input


    return bench_input.input_pipeline(argv)


def raw_text(argv):
    from zoo.tools import bench_raw_text

    return bench_raw_text.raw_text(argv)


BENCHMARKS = {
    "adaptive-softmax": adaptive_softmax,
    "ptb-softmax": ptb_softmax,
    "moe-ptb": moe_ptb,
    "moe": moe,
    "optimizer-memory": optimizer_memory,
    "moe-parallel": moe_parallel,
    "serving": serving,
    "input": input_pipeline,
    "raw-text": raw_text,
}


def run(name, argv=()):
    """Runs the benchmark `name` with its command-line arguments `argv`."""
    if name not in BENCHMARKS:
        raise ValueError(f"Unknown benchmark {name!r}; known benchmarks: {', '.join(sorted(BENCHMARKS))}.")
    return BENCHMARKS[name](list(argv))
