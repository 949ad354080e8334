"""The measurement harness of `zoo benchmark` and `zoo reproduce`: timing, warm-up, interleaving,
medians, the machine, the report and the one child-process protocol. Standard library and numpy at
module level only: the PyTorch peers (*_torch.py) import it as a sibling, under a Python without the zoo.
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


# ---- timing -------------------------------------------------------------------------------------
def timed(fn, *args, **kwargs):
    """`(seconds, fn(*args, **kwargs))`. A TensorFlow call's result must be read (`float(loss)`,
    `.numpy()`) inside `fn`: on the CPU a step has finished once its outputs exist."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def timed_for(min_seconds, fn, *args, **kwargs):
    """`(seconds, calls, the last call's result)`: `fn` called back to back for `min_seconds`, at least
    once: a side's steady state, not the wake-up of its threads after another side's."""
    start, calls = time.perf_counter(), 0
    while True:
        out, calls = fn(*args, **kwargs), calls + 1
        seconds = time.perf_counter() - start
        if seconds >= min_seconds:
            return seconds, calls, out


def rotated(names, round_):
    """The sides' order in round `round_`, rotated by one a round (A B, B A, A B, …)."""
    names = list(names)
    k = round_ % len(names) if names else 0
    return names[k:] + names[:k]


def interleaved(calls, repeats, skip=None):
    """`{name: [calls[name]() of each round]}`: `repeats` rounds in `rotated` order, so that a shared
    machine's noise hits every side alike; `skip(name, round_)` leaves a call out of a round."""
    answers = {name: [] for name in calls}
    for r in range(repeats):
        for name in rotated(calls, r):
            if skip is None or not skip(name, r):
                answers[name].append(calls[name]())
    return answers


def summary(times, warmup_s=()):
    """`{"warmup_s", "times_s", "median_s", "min_s"}` of a list of seconds (None for no times)."""
    times = list(times)
    return {"warmup_s": list(warmup_s), "times_s": times, "median_s": statistics.median(times) if times else None,
            "min_s": min(times) if times else None}


def measure(calls, repeats, warmup=1):
    """Each of `calls` (`{name: fn()}`) run `warmup` times untimed, one side after the other, then
    `repeats` timed rounds interleaved: `{name: summary(...) + {"result": the last call's result}}`."""
    warm = {name: [timed(fn)[0] for _ in range(warmup)] for name, fn in calls.items()}
    runs = interleaved({name: (lambda fn=fn: timed(fn)) for name, fn in calls.items()}, repeats)
    return {name: {**summary([s for s, _ in runs[name]], warm[name]),
                   "result": runs[name][-1][1] if runs[name] else None} for name in calls}


def paired_ratio(times, baseline):
    """The median over the rounds of a round's time over the baseline's in the same round: a load
    that changes during the run (another job starting or stopping) does not skew it."""
    ratios = [t / b for t, b in zip(times, baseline) if b]
    return statistics.median(ratios) if ratios else None


def median_rate(answers, count="tokens", seconds="s"):
    """The median of `answers[i][count] / answers[i][seconds]` (tokens/s of a worker's answers)."""
    return statistics.median(a[count] / a[seconds] for a in answers)


def profiled(fn, logdir):
    """`fn()` run once under tf.profiler, its trace written under `logdir`: `(its result, the ops' rows)`,
    the rows `zoo.compat.framework_op_stats`'s (each op's "operation", "type", "total_self_time" in
    microseconds), idle time left out."""
    import tensorflow as tf

    from zoo.compat import framework_op_stats

    tf.profiler.experimental.start(logdir)
    try:
        out = fn()
    finally:
        tf.profiler.experimental.stop()
    return out, [r for r in framework_op_stats(logdir) if r["type"] != "IDLE"]


def self_time_shares(rows, key=lambda row: row["type"], top=None):
    """`[(name, seconds, share)]`, largest first: `profiled`'s self-time summed by `key(row)`."""
    sums = {}
    for row in rows:
        sums[key(row)] = sums.get(key(row), 0.0) + float(row["total_self_time"] or 0)
    total = sum(sums.values()) or 1.0
    return [(name, t / 1e6, t / total) for name, t in sorted(sums.items(), key=lambda kv: -kv[1])[:top]]


def percentile(values, q):
    """The q-th percentile (0–100), linear interpolation between order statistics."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


# ---- the machine --------------------------------------------------------------------------------
def proc_kib(field, path="/proc/self/status"):
    """The value of `field` (a line `FIELD:  N kB`) of a /proc file, in KiB."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{path} has no {field}")


def status_kib(field):  # VmRSS, VmHWM, ... of this process
    return proc_kib(field)


def cpuinfo(key):
    """The first value of `key` in /proc/cpuinfo, or None (no such line, or no such file)."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = (line.split(":", 1) for line in f if ":" in line)
            return next((value.strip() for name, value in fields if name.strip() == key), None)
    except OSError:
        return None


# the vector instruction sets that decide which kernels a CPU runs (Zen 3 and Zen 4 EPYCs share a name)
ISA = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")


def cpu_model():
    return cpuinfo("model name") or platform.processor() or "unknown CPU"


def cpu_flags(wanted):
    """Which of the instruction sets `wanted` the CPU has, as /proc/cpuinfo names them ("unknown" without it)."""
    flags = cpuinfo("flags")
    if flags is None:
        return "unknown"
    return ", ".join(f for f in wanted if f in flags.split()) or "none of " + ", ".join(wanted)


def load_average():
    """The 1-, 5- and 15-minute load averages, rounded; None where the OS has none."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def load_average_text():
    return " ".join(f"{x:.2f}" for x in load_average() or []) or "?"


def machine():
    """What the figures were measured on, as the results' JSON records it (`zoo reproduce`'s
    `machine`); TensorFlow's and Keras's versions and the GPUs where TensorFlow is imported."""
    family, model = cpuinfo("cpu family"), cpuinfo("model")
    info = {"cpu_model": cpu_model(), "cpu_family_model": f"{family}/{model}" if family and model else None,
            "cpu_isa": cpu_flags(ISA), "cores": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}
    try:
        info["memory_gib"] = round(proc_kib("MemTotal", "/proc/meminfo") / 2**20, 1)
    except (OSError, RuntimeError, ValueError):
        pass
    if "tensorflow" in sys.modules:  # the measurements import it; --results does not need it
        import keras
        import tensorflow as tf

        info.update(tensorflow=tf.__version__, keras=keras.version(),
                    gpus=[d.name for d in tf.config.list_physical_devices("GPU")])
    return info


def machine_summary():
    """The benchmarks' `machine:` line up to the load average."""
    return (f"{platform.machine()} {cpu_model()}, os.cpu_count() = {os.cpu_count()}, load average "
            f"{load_average_text()}")


def cpu_tensorflow(threads=0, inter_threads=0):
    """TensorFlow, imported for a CPU benchmark: its logs quiet, no GPU, `threads` intra-op and
    `inter_threads` inter-op threads (0: TensorFlow's choice)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    if inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(inter_threads)
    return tf


def versions():
    """`tensorflow X, keras Y`, for the `machine:` line."""
    import keras
    import tensorflow as tf

    return f"tensorflow {tf.__version__}, keras {keras.__version__}"


def directory_bytes(path):
    """The bytes of every file under `path` (an export's, a preset directory's size on disk)."""
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


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


# ---- the report ---------------------------------------------------------------------------------
def parser(name, description, repeats=None, repeats_help=None, out=False):
    """The argument parser of `zoo benchmark NAME`, described by the first paragraph of
    `description` (a module's docstring will do), with the flags every benchmark shares: `--json`,
    `--repeats` (when `repeats` is given: its default, or "" for one the benchmark picks) and, with
    `out`, `--out` for the markdown table."""
    p = argparse.ArgumentParser(prog=f"zoo benchmark {name}",
                                description=description.split("\n\n")[0] if description else None)
    if repeats is not None:
        p.add_argument("--repeats", type=int, default=repeats if repeats != "" else None,
                       help=repeats_help or f"timed repeats (default {repeats})")
    if out:
        p.add_argument("--out", metavar="FILE", help="also write the markdown table here")
    p.add_argument("--json", metavar="PATH", help="also write the results here")
    return p


def at_least_one(args, *names):
    """A ValueError in one sentence for the first parsed count of `names` below 1 (None passes)."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}.")


def command(name, argv):
    """The command line that ran benchmark `name` with `argv`, as a user types it."""
    return shlex.join(["zoo", "benchmark", name, *argv])


def header(name, argv, **more):
    """The results' first fields (the command, the benchmark, the CPU), printed as `command: …`."""
    line = command(name, argv)
    print(f"command: {line}", flush=True)
    return {"command": line, "benchmark": name, "cpu": cpu_model(), "cpu_count": os.cpu_count(), **more}


def fmt(x, spec):
    """`x` formatted by `spec`, or "-" for a figure that was not measured."""
    return "-" if x is None else format(x, spec)


def markdown_table(columns, rows):
    """A markdown table: `columns` its headings (one ending in ":" is right-aligned; the colon is not
    shown), `rows` lists of cells."""
    heads = [c[:-1] if c.endswith(":") else c for c in columns]
    rules = ["---:" if c.endswith(":") else "---" for c in columns]
    return "\n".join("|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"
                     for cells in [heads, rules, *rows])


def text_table(columns, rows):
    """A fixed-width table for the terminal: `columns` `(heading, width)` pairs (a negative width
    left-aligns), `rows` lists of cells; the heading is underlined."""
    def line(cells):
        return " ".join(f"{str(c):<{-w}}" if w < 0 else f"{str(c):>{w}}" for c, (_, w) in zip(cells, columns))
    head = line([c for c, _ in columns])
    return "\n".join([head, "-" * len(head), *(line(r) for r in rows)])


def report(args, results, table=None):
    """The end of a benchmark: `table` printed and written to `--out` (if the parser has it),
    the results written to `--json` (atomically); returns the results."""
    if table is not None:
        print(table, flush=True)
        if getattr(args, "out", None):
            with open(args.out, "w") as f:
                f.write(table if table.endswith("\n") else table + "\n")
            print(f"table written to {args.out}")
    if args.json:
        from zoo.files import write_json

        write_json(args.json, results)
        print(f"results written to {args.json}")
    return results


# ---- child processes ----------------------------------------------------------------------------
# One protocol: a child prints each answer as one JSON line on its stdout (anything else it prints
# goes to stderr); a worker first prints its ready line, then answers each command line on its stdin
# (`{"op": method, **arguments}`) until `{"op": "quit"}`; a one-shot child's ready line is its answer.
def child_env():
    """This environment for a child process, with the zoo this process runs (a checkout or the
    install) first on its path and TensorFlow's logs quiet."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    spec = importlib.util.find_spec("zoo")
    if spec is not None and spec.submodule_search_locations:
        root = os.path.dirname(list(spec.submodule_search_locations)[0])
        env["PYTHONPATH"] = os.pathsep.join(p for p in [root, env.get("PYTHONPATH")] if p)
    return env


def answer(fn, *args, **kwargs):
    """In a one-shot child: runs `fn`, its prints sent to stderr, and prints its result as the
    child's one JSON line."""
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.stdout = out
    print(json.dumps(result), flush=True)


def serve(worker, ready):
    """A worker process's loop: prints `ready` (a dict) as one JSON line, then answers each
    command line on stdin with the JSON of `worker.op(**arguments)` (or `{"error": ...}`)."""
    out, sys.stdout = sys.stdout, sys.stderr
    print(json.dumps(ready), file=out, flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            reply = getattr(worker, op)(**command)
        except Exception as e:  # noqa: BLE001 - the parent raises it, naming the worker
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), file=out, flush=True)


class Worker:
    """The parent's side of a child process (`command`, named `what` in errors): `ready` holds its
    first line; calling it sends a command and returns the answer. A failure raises a RuntimeError
    with the exit status and the end of the child's stderr; `timeout` seconds end it."""

    def __init__(self, command, what, timeout=None):
        self.what, self._stderr = what, tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, env=child_env())
        self._timer = threading.Timer(timeout, self.proc.kill) if timeout else None
        if self._timer:
            self._timer.start()
        try:
            self.ready = self._read()
        except BaseException:
            self.close()
            raise

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            status = self.proc.wait()
            self._stderr.seek(0)
            tail = self._stderr.read().strip()[-1500:]
            killed = " (killed: out of memory, or past its time?)" if status in (-9, 137) else ""
            raise RuntimeError(f"{self.what} failed, exit status {status}{killed}: {tail}")
        reply = json.loads(line)
        if isinstance(reply, dict) and "error" in reply:
            raise RuntimeError(f"{self.what}: {reply['error']}")
        return reply

    def __call__(self, op, **args):
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self._timer:
            self._timer.cancel()
        self._stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def generate_request(loaded, text, max_new_tokens, temperature=0.0, top_k=0):
    """The `generate` signature of the SavedModel `loaded` called as a model server calls it: the
    prompts `text`, every argument a tensor (top-p 1, seed 0, no beams); the signature's outputs."""
    import tensorflow as tf

    return loaded.signatures["generate"](
        text=tf.constant(text), max_new_tokens=tf.constant(max_new_tokens), temperature=tf.constant(temperature),
        top_k=tf.constant(top_k), top_p=tf.constant(1.0), seed=tf.constant(0), num_beams=tf.constant(1))


def run_once(command, what, timeout=None):
    """A one-shot child's answer (its one JSON line); a failure raises a RuntimeError naming `what`."""
    with Worker(command, what, timeout) as child:
        return child.ready


def python_child(script, args, what, timeout=1800):
    """The answer of the Python source `script` run with the arguments `args` in a fresh interpreter
    (nothing of this process imported; `json`, `sys` and `harness`, this file, which imports neither
    the zoo nor TensorFlow, imported for the script)."""
    prelude = f"import json, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import harness"
    return run_once([sys.executable, "-c", prelude + "\n" + script, *map(str, args)], what, timeout)
