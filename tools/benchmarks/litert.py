"""`zoo benchmark litert`: a preset's LiteRT exports (float32 and int8) against in-process XLA `lm.generate`
and the SavedModel's `generate` in a TensorFlow-only process: batch-1 greedy new tokens per second, each
one's share of the memory's read bandwidth, scoring throughput and the files' sizes.

How it measures: docs/benchmarks.md#litert.
"""

import functools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import preset_list

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "litert_worker.py")
SIDES = ("litert-int8", "litert-float32", "xla", "saved-model")
BYTES_PER_WEIGHT = {"litert-int8": 1, "litert-float32": 4, "xla": 4, "saved-model": 4}
PROMPT = "the company said"
SMALL_CONFIG = {"embedding_dim": 16, "blocks": [[[3, 32]], [[3, 32]]]}


class Keras:
    """The zoo's side, in its own process: the model, its exports, and XLA's `lm.generate`."""

    def __init__(self, threads):
        harness.cpu_tensorflow(threads, threads)

    def load(self, preset, random, small, work):
        import keras

        import zoo
        from zoo.export import export_litert, export_saved_model
        from zoo.models.compute import multiply_adds_per_token
        from zoo.tools.benchmarks.common import with_stand_in_vocabulary

        if small:
            keras.utils.set_random_seed(0)
        config = {"vocabulary_size": 50, **SMALL_CONFIG} if small else {"weights": None if random else "trained"}
        model = self.model = with_stand_in_vocabulary(zoo.load(preset, **config))
        paths = {"litert-int8": export_litert(model, os.path.join(work, "litert-int8"), quantize="int8"),
                 "litert-float32": export_litert(model, os.path.join(work, "litert-float32")),
                 "saved-model": export_saved_model(model, work, "saved-model")}
        self.prompt = model.tokenizer.encode(PROMPT, add_eos=False)
        return {"paths": paths, "prompt": self.prompt, "parameters": int(model.count_params()),
                "vocabulary_size": int(model.vocabulary_size), "weights_read": multiply_adds_per_token(model)["total"],
                "bytes": {side: harness.directory_bytes(path) if side == "saved-model" else
                          os.path.getsize(os.path.join(path, "model.tflite")) for side, path in paths.items()}}

    def generate(self, new_tokens, min_seconds=0.0):
        seconds, calls, out = harness.timed_for(min_seconds, self.model.generate, [self.prompt],
                                                max_new_tokens=new_tokens, sampler="greedy", stop=None)
        made = np.asarray(out[0][len(self.prompt):]).tolist()
        return {"s": seconds, "tokens": calls * len(made), "ids": made}

    def score(self, ids, min_seconds=0.0):
        ids = np.asarray([ids], np.int32)
        seconds, calls, scores = harness.timed_for(
            min_seconds, lambda: np.asarray(self.model.target_log_probs(ids[:, :-1], ids[:, 1:])))
        return {"s": seconds, "tokens": calls * scores.size, "sum": float(scores.sum())}


def measure(args, preset, small):
    """Starts each side's process (the zoo's makes the exports), then times every side."""
    work, workers = tempfile.mkdtemp(prefix="zoo-litert-"), []

    def start(what, *command):
        workers.append(harness.Worker([sys.executable, *command, str(args.threads)], what))
        return workers[-1]

    try:
        keras = start("the zoo's worker", "-m", "zoo.tools.benchmarks.litert", "--worker")
        info = keras("load", preset=preset, random=args.random or preset in args.paper_size, small=small, work=work)
        lite = start("the LiteRT worker", WORKER, "litert")
        info["ops"] = {side: lite("load", name=side, path=info["paths"][side])["ops"] for side in SIDES[:2]}
        saved = start("the SavedModel worker", WORKER, "saved-model")
        info["saved_model_load_s"] = saved("load", path=info["paths"]["saved-model"])["load_s"]
        call, n, t = functools.partial, args.new_tokens, args.min_seconds
        generate = {**{side: call(lite, "generate", name=side, prompt=info["prompt"], new_tokens=n, min_seconds=t)
                       for side in SIDES[:2]}, "xla": call(keras, "generate", new_tokens=n, min_seconds=t),
                    "saved-model": call(saved, "generate", text=PROMPT, new_tokens=n, min_seconds=t)}
        window = (4 + np.random.default_rng(0).integers(0, info["vocabulary_size"] - 4, args.window)).tolist()
        score = {**{side: call(lite, "score", name=side, ids=window, min_seconds=t) for side in SIDES[:2]},
                 "xla": call(keras, "score", ids=window, min_seconds=t)}
        bandwidth = [lite("read_bandwidth", mib=args.buffer_mib)]
        for fn in [*generate.values(), *score.values()]:
            fn()  # the warm-up: XLA's compilation, the first calls' allocations
        runs = {"generate": harness.interleaved(generate, args.repeats),
                "score": harness.interleaved(score, args.repeats)}
        bandwidth.append(lite("read_bandwidth", mib=args.buffer_mib))
        if args.profile:
            info["profile"] = profile(lite, info["prompt"], n, work)
        return summarise(info, runs, bandwidth)
    finally:
        for worker in workers:
            worker.close()
        shutil.rmtree(work, ignore_errors=True)


def summarise(info, runs, bandwidth):
    """Each side's median rate, its ratio to XLA's (the median of each round's ratio), and its share
    of the read bandwidth (the better of the measurements before and after)."""
    read_gbs, gen, rows = max(b["gbs"] for b in bandwidth), runs["generate"], {}
    rates = {side: [a["tokens"] / a["s"] for a in answers] for side, answers in gen.items()}
    for side in SIDES:
        rate, read = statistics.median(rates[side]), info["weights_read"] * BYTES_PER_WEIGHT[side]
        rows[side] = {"tokens_s": rate, "vs_xla": harness.paired_ratio(rates[side], rates["xla"]),
                      "bytes_per_token": read, "bandwidth_share": rate * read / 1e9 / read_gbs,
                      "bytes": info["bytes"].get(side)}
        if side in runs["score"]:
            rows[side]["score_tokens_s"] = harness.median_rate(runs["score"][side])
    same = [a == b for a, b in zip(gen["litert-float32"][-1]["ids"], gen["xla"][-1]["ids"])]
    sums = [runs["score"][side][-1]["sum"] for side in ("litert-float32", "xla")]
    return {**{k: v for k, v in info.items() if k != "paths"}, "read_gbs": read_gbs, "bandwidth": bandwidth,
            "rows": rows, "greedy_equal_float32_xla": float(np.mean(same)) if same else None, "runs": runs,
            "score_difference_float32_xla": abs(sums[0] - sums[1])}


def profile(lite, prompt, new_tokens, work, seconds=3.0):
    """`perf record` on the LiteRT worker while it makes int8 tokens, `new_tokens` a call, for
    `seconds`: the functions with the most samples (the kernels), as `[(symbol, share)]`."""
    data = os.path.join(work, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-o", data, "-p", str(lite.ready["pid"])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = time.monotonic()  # perf writes its file's header once it records: wait for it
        while not (os.path.exists(data) and os.path.getsize(data)):
            if perf.poll() is not None or time.monotonic() - started > 30:
                raise RuntimeError("`perf record` did not start: run without --profile, or check perf's permissions.")
            time.sleep(0.05)
        lite("generate", name="litert-int8", prompt=prompt, new_tokens=new_tokens, min_seconds=seconds)
    finally:
        perf.send_signal(2)
        try:
            perf.wait(timeout=60)
        except subprocess.TimeoutExpired:
            perf.kill()
            perf.wait()
    report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "symbol"],
                            capture_output=True, text=True).stdout
    rows = [re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.+)", line) for line in report.splitlines()]
    return [(symbol(row[2]), float(row[1]) / 100) for row in rows if row][:12]


def symbol(text):
    """A function's name as perf prints it, without its padding, columns and C++ template arguments."""
    name = re.split(r"\s{2,}", text.strip())[0]
    while "<" in name and re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "", name)
    return name


def table(results):
    """The markdown table of every preset's sides, then what each preset's run said besides."""
    rows, notes = [], []
    for preset, r in results["presets"].items():
        for side, row in r["rows"].items():
            rows.append([preset, side, f"{row['tokens_s']:,.1f}", f"{row['vs_xla']:.2f}×",
                         f"{row['bytes_per_token'] / 1e6:,.1f}", f"{row['bandwidth_share']:.0%}",
                         harness.fmt(row.get("score_tokens_s"), ",.0f"),
                         harness.fmt(row["bytes"] and row["bytes"] / 2**20, ",.1f")])
        notes.append(f"{preset}: {r['parameters']:,} parameters; read bandwidth {r['read_gbs']:.1f} GB/s; int8 file "
                     f"{r['bytes']['litert-int8'] / r['bytes']['litert-float32']:.1%} of float32's; LiteRT "
                     f"float32's greedy ids equal to XLA's: {harness.fmt(r['greedy_equal_float32_xla'], '.0%')}, its "
                     f"window's log-probability {r['score_difference_float32_xla']:.1e} from XLA's; ops (int8): "
                     f"{r['ops']['litert-int8']}")
        if r.get("profile"):
            notes.append(f"{preset}, int8 generation under perf: " +
                         ", ".join(f"{name} {share:.0%}" for name, share in r["profile"]))
    head = ["preset", "side", "new tokens/s:", "× XLA:", "MB of weights per token:", "share of read bandwidth:",
            "scoring tokens/s:", "file MiB:"]
    return "\n".join([f"command: `{results['command']}`", f"CPU: {results['cpu']}, {results['threads']} threads a side",
                      "", harness.markdown_table(head, rows), ""] + [f"- {note}" for note in notes])


def parse(argv):
    p = harness.parser("litert", __doc__, 5, out=True)
    p.add_argument("--presets", default="gcnn-ptb,gcnn-en", help="trained presets (default gcnn-ptb,gcnn-en)")
    p.add_argument("--paper-size", default="gcnn-14", help="presets measured with random weights and a stand-in "
                   "vocabulary, at the paper's size (default gcnn-14; '' for none)")
    p.add_argument("--random", action="store_true", help="random weights for every preset")
    p.add_argument("--new-tokens", type=int, default=64, help="greedy new tokens per call (default 64)")
    p.add_argument("--min-seconds", type=float, default=0.5, help="a side's calls repeat back to back for at "
                   "least this long in each round, its steady state (default 0.5; 0 for one call)")
    p.add_argument("--window", type=int, default=256, help="tokens per scoring call (default 256)")
    p.add_argument("--threads", type=int, default=2, help="threads per side (default 2)")
    p.add_argument("--buffer-mib", type=int, default=2048, help="the read-bandwidth buffer (default 2048 MiB)")
    p.add_argument("--profile", action="store_true", help="int8 generation under `perf record`: the kernels")
    p.add_argument("--small", action="store_true", help="a tiny random GCNN alone: a smoke test")
    args = p.parse_args(argv)
    try:
        harness.at_least_one(args, "repeats", "new_tokens", "window", "threads", "buffer_mib")
        if args.min_seconds < 0:
            raise ValueError(f"--min-seconds must be 0 or more, got {args.min_seconds}.")
        args.presets = ["gcnn-ptb"] if args.small else preset_list(args.presets)
        args.paper_size = [] if args.small else [n for n in args.paper_size.split(",") if n]
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv):
    args = parse(argv)
    results = harness.header("litert", argv, threads=args.threads, machine=harness.machine(), presets={})
    for preset in args.presets + [n for n in args.paper_size if n not in args.presets]:
        print(f"{preset}: exporting, then {args.repeats} rounds of every side ...", flush=True)
        results["presets"][preset] = measure(args, preset, args.small)
    results["load_average_after"] = harness.load_average_text()
    return harness.report(args, results, table(results))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        harness.serve(Keras(int(sys.argv[2])), {"ready": True})
    else:
        main(sys.argv[1:])
