"""What the benchmarks share: the machine they ran on, peak memory, Zipf inputs, number formatting,
child processes and the results file.

Standard library and numpy only, and no import of the zoo: the PyTorch peer of `adaptive-softmax`
(adaptive_softmax_torch.py) imports this file as its sibling, under a Python without the zoo.
"""

import importlib.util
import json
import sys
import os
import platform
import subprocess
import threading
import time

import numpy as np


# ---- the machine ------------------------------------------------------------------------------
def proc_kib(field, path="/proc/self/status"):
    """The value of `field` (a line `FIELD:  N kB`) of a /proc file, in KiB."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{path} has no {field}")


def status_kib(field):
    """A field of this process's /proc/self/status (VmRSS, VmHWM), in KiB."""
    return proc_kib(field)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average():
    """The 1-, 5- and 15-minute load averages, rounded to hundredths; None where the OS has none.
    A shared machine shows here."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def load_average_text():
    load = load_average()
    return " ".join(f"{x:.2f}" for x in load) if load else "?"


def machine_summary():
    """The benchmarks' `machine:` line up to the load average."""
    return (f"{platform.machine()} {cpu_model()}, os.cpu_count() = {os.cpu_count()}, load average "
            f"{load_average_text()}")


# ---- peak memory ------------------------------------------------------------------------------
class PeakRSS:
    """Peak resident-set growth over a region (a step). Preferred: the kernel's high-water mark
    VmHWM, reset to the current RSS by writing 5 to /proc/self/clear_refs (Linux >= 4.0), so
    the peak is exact. Fallback: a thread sampling VmRSS every millisecond."""

    def __init__(self):
        self.process_peak_kib = status_kib("VmHWM")
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.method = "VmHWM reset through /proc/self/clear_refs before each step"
        except OSError:
            self.method = "VmRSS sampled every 1 ms by a background thread"
        self._stop = None

    def start(self):
        self.process_peak_kib = max(self.process_peak_kib, status_kib("VmHWM"))
        if self.method.startswith("VmHWM"):
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.base_kib = status_kib("VmRSS")
        else:
            self.base_kib = self._max = status_kib("VmRSS")
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _sample(self):
        while not self._stop.is_set():
            self._max = max(self._max, status_kib("VmRSS"))
            time.sleep(0.001)

    def stop(self):
        """Peak RSS growth since `start`, in KiB."""
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._stop = None
            peak = max(self._max, status_kib("VmRSS"))
        else:
            peak = status_kib("VmHWM")
        self.process_peak_kib = max(self.process_peak_kib, peak)
        return peak - self.base_kib


# ---- inputs -----------------------------------------------------------------------------------
def zipf_targets(vocabulary_size, count, seed=0):
    """`count` ids in [0, vocabulary_size) with P(id = r) proportional to 1 / (r + 1): the
    rank-frequency law of words, truncated to the vocabulary (id 0 the most frequent)."""
    if vocabulary_size < 1:
        raise ValueError(f"vocabulary_size must be >= 1, got {vocabulary_size}.")
    cdf = np.cumsum(1.0 / np.arange(1, vocabulary_size + 1, dtype=np.float64))
    cdf /= cdf[-1]
    ids = np.searchsorted(cdf, np.random.default_rng(seed).random(count), side="right")
    return np.minimum(ids, vocabulary_size - 1).astype(np.int32)


# ---- numbers ----------------------------------------------------------------------------------
def with_stand_in_vocabulary(model):
    """`model`, given a word vocabulary of its size (`w0`, `w1`, …) where it has no tokenizer: a
    preset of the paper's size, whose vocabulary comes with weights that do not ship here, can
    then be exported and served for its speed and size."""
    if getattr(model, "tokenizer", None) is None:
        from zoo.data.vocab import SPECIALS, WordTokenizer

        model.tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(model.vocabulary_size - len(SPECIALS))])
    return model


def fmt(x, spec):
    """`x` formatted by `spec`, or "-" for a figure that was not measured."""
    return "-" if x is None else format(x, spec)


# ---- child processes and results ----------------------------------------------------------------
def child_env():
    """This environment for a child process, with the zoo this process runs (a checkout or the
    install) first on its path."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    spec = importlib.util.find_spec("zoo")
    if spec is not None and spec.submodule_search_locations:
        root = os.path.dirname(list(spec.submodule_search_locations)[0])
        env["PYTHONPATH"] = os.pathsep.join(p for p in [root, env.get("PYTHONPATH")] if p)
    return env


def run_child(command, result_file, what):
    """Runs `command`, which writes `result_file` (JSON): `(result, wall seconds)`, or None after
    printing why it failed and the end of its output."""
    start = time.perf_counter()
    proc = subprocess.run(command, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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


def child_json(script, args, what, timeout=1800):
    """Runs the Python source `script` with the arguments `args` in a fresh interpreter (nothing
    of this process imported; TensorFlow's logs quiet) and returns the JSON object its last line
    of output prints. A failure raises a RuntimeError naming `what`, with the end of its stderr."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env,
                         timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed: {out.stderr.strip()[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def at_least_one(args, *names):
    """A ValueError in one sentence for the first of the parsed counts `names` below 1 (an optional
    count left out, None, passes)."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}.")


def preset_list(value):
    """The names of a comma-separated `--presets` value; one that names none is refused in one
    sentence."""
    presets = [name for name in value.split(",") if name]
    if not presets:
        raise ValueError("--presets names no preset; give at least one, e.g. --presets gcnn-ptb.")
    return presets


def write_results(path, out):
    """Writes a benchmark's results to `path` as JSON (if a path was given) and says where."""
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        print(f"results written to {path}")


def serve(worker, ready):
    """A benchmark worker process's loop: prints `ready` (a dict) as one JSON line, then answers
    each JSON command line on stdin, `{"op": method, **arguments}`, with the JSON of
    `worker.method(**arguments)` (or `{"error": ...}`) until `{"op": "quit"}`. Only answers go to
    the real stdout; anything else printed goes to stderr."""
    out = sys.stdout
    sys.stdout = sys.stderr
    print(json.dumps(ready), file=out, flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            answer = getattr(worker, op)(**command)
        except Exception as e:  # noqa: BLE001 - the orchestrator prints it and stops
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), file=out, flush=True)
