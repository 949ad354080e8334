"""`zoo benchmark serving`: the exported SavedModel against the in-process Keras model.

How it measures: docs/benchmarks.md#serving.
"""

import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import build_model, preset_list
from zoo.tools.benchmarks.harness import fmt, percentile

BATCH = 64
TARGET_RATIO = 1.1


def sentences(vocabulary, count, words=20, seed=0):
    """`count` lines of `words` words drawn from the vocabulary (specials excluded)."""
    rng = np.random.default_rng(seed)
    pool = vocabulary.tokens[4:]
    return [" ".join(pool[i] for i in rng.integers(0, len(pool), size=words)) for _ in range(count)]


def in_process(model):
    """`(general, batched)`: `model.score` with its trace generalised to [1, None] (as varied traffic
    leaves it), and Python tokenisation with one padded batch through the tf.function `score` uses."""
    import tensorflow as tf

    spec = tf.TensorSpec([1, None], tf.int32)
    trace = tf.function(lambda ids, targets: model.head.target_log_prob(model(ids, training=False), targets),
                        input_signature=[spec, spec], autograph=False)

    def general(texts):
        rows = map(model.tokenizer.encode, texts)
        return [trace(tf.constant([r[:-1]], tf.int32), tf.constant([r[1:]], tf.int32)).numpy()[0] for r in rows]

    def batched(texts):
        rows = [model.tokenizer.encode(t) for t in texts]
        lengths = np.array([len(r) - 1 for r in rows])
        ids = np.array([r + [0] * (lengths.max() + 1 - len(r)) for r in rows], np.int32)
        log_probs = model.target_log_probs(ids[:, :-1], ids[:, 1:])
        log_probs = np.where(np.arange(ids.shape[1] - 1)[None, :] < lengths[:, None], log_probs, 0.0)
        total = log_probs.sum(axis=1)
        return {"token_log_probs": log_probs, "lengths": lengths, "log_prob": total,
                "perplexity": np.exp(-total / lengths)}

    return general, batched


def percentiles(times, **more):
    return {"p50_s": percentile(times, 50), "p99_s": percentile(times, 99), "calls": len(times), **more}


def rate(times):
    return {"median_s": statistics.median(times), "sentences_per_s": BATCH / statistics.median(times),
            "calls": len(times)}


def measure(preset, args):
    import tensorflow as tf

    from zoo.export import export_saved_model

    model = build_model(preset, args.small)
    general, batched = in_process(model)
    one, batch = sentences(model.tokenizer, 1), sentences(model.tokenizer, BATCH, seed=1)
    want_one = model.score(one)[0]  # the in-process functions traced before the SavedModel is loaded
    np.testing.assert_allclose(general(one)[0], want_one, atol=1e-5)
    want_batch = batched(batch)["token_log_probs"]
    with tempfile.TemporaryDirectory(prefix="zoo-bench-serving-") as base:
        export_s, path = harness.timed(export_saved_model, model, base, preset)
        r = {"preset": preset, "params": int(model.count_params()), "export_s": export_s,
             "size_bytes": harness.directory_bytes(path)}
        loaded = tf.saved_model.load(path)

        def served(texts):
            return {k: v.numpy() for k, v in loaded.signatures["serving_default"](text=tf.constant(texts)).items()}

        def timings(kind, paths, calls, figures):
            runs = harness.measure(paths, calls, args.warmup)
            r.update({f"{kind}_{name}": figures(run["times_s"]) for name, run in runs.items()})
            return {name: run["result"] for name, run in runs.items()}

        np.testing.assert_allclose(served(one)["token_log_probs"][0], want_one, atol=1e-5)
        np.testing.assert_allclose(served(batch)["token_log_probs"], want_batch, atol=1e-5)
        print(f"  {preset}: exported in {export_s:.1f} s ({r['size_bytes'] / 2**20:.1f} MiB); SavedModel answers "
              "equal the in-process model's to 1e-5", flush=True)
        timings("latency", {"saved": lambda: served(one), "score": lambda: model.score(one),
                            "general": lambda: general(one)}, args.latency_calls, percentiles)
        timings("throughput", {"saved": lambda: served(batch), "batched": lambda: batched(batch),
                               "score": lambda: model.score(batch)}, args.batch_calls, rate)
        prompt, settings = sentences(model.tokenizer, 1, words=10, seed=2), {"temperature": 0.8, "top_k": 40}
        paths = {"saved": lambda: harness.generate_request(loaded, prompt, args.new_tokens, **settings)["text"]
                 .numpy()[0].decode(),
                 "local": lambda: model.generate(prompt[0], args.new_tokens, **settings, seed=0, jit_compile=False)}
        written = timings("generate", paths, args.generate_calls, lambda t: percentiles(t, new_tokens=args.new_tokens))
        if written["saved"] != written["local"]:
            raise AssertionError(f"generate: SavedModel wrote {written['saved']!r}, in process {written['local']!r}")
        print(f"  {preset}: stress, {args.threads} threads for {args.seconds:g} s ...", flush=True)
        r["stress"] = run_stress(served, one, want_one, args.threads, args.seconds)

    def ratios(side, other, prefix=""):
        return {f"{prefix}{q}": r[f"{side}_saved"][f"{q}_s"] / r[f"{side}_{other}"][f"{q}_s"] for q in ("p50", "p99")}

    best_local = min(r["throughput_batched"]["median_s"], r["throughput_score"]["median_s"])
    return {**r, "ratios": {**ratios("latency", "score", "latency_"),
                            "batch": r["throughput_saved"]["median_s"] / best_local},
            "ratios_general": ratios("latency", "general", "latency_"), "ratios_generate": ratios("generate", "local")}


def run_stress(served, texts, want, threads, seconds):
    """`threads` threads calling `served(texts)` for `seconds`; answers checked against `want`."""
    stop, counts, wrong, errors = time.perf_counter() + seconds, [0] * threads, [0] * threads, []

    def worker(i):
        while not counts[i] or time.perf_counter() < stop:  # one call at least, however late the thread starts
            counts[i] += 1
            try:
                out = served(texts)
                wrong[i] += not (np.allclose(out["token_log_probs"][0], want, atol=1e-5)
                                 and np.all(np.isfinite(out["perplexity"])))
            except Exception as e:  # counted and reported, never raised: the point is to count them
                errors.append(f"{type(e).__name__}: {e}")

    with ThreadPoolExecutor(threads) as pool:
        wall, _ = harness.timed(lambda: list(pool.map(worker, range(threads))))
    return {"threads": threads, "seconds": wall, "calls": sum(counts), "calls_per_s": sum(counts) / wall,
            "errors": len(errors), "first_error": errors[0] if errors else None, "wrong_answers": sum(wrong)}


def table(results):
    def path(label, lat=None, thr=None):
        return [label, *(fmt(lat and lat[q] * 1e3, ".2f") for q in ("p50_s", "p99_s")),
                fmt(thr and thr["median_s"] * 1e3, ".1f"), fmt(thr and thr["sentences_per_s"], ".0f")]

    def ratio(label, values, checked, what=""):
        return [label, *(f"{v:.2f}" for v in values), *[""] * (4 - len(values)),
                f" {what}<= {TARGET_RATIO}: {'yes' if max(checked) <= TARGET_RATIO else 'NO'}"]

    rows = []
    for r in results:
        q, g, e, s = r["ratios"], r["ratios_general"], r["ratios_generate"], r["stress"]
        n = r["generate_saved"]["new_tokens"]
        rows += [[r["preset"] if i == 0 else "", *cells] for i, cells in enumerate([
            path("SavedModel serving_default", r["latency_saved"], r["throughput_saved"]),
            path("in-process model.score (static [1, 21] trace)", r["latency_score"], r["throughput_score"]),
            path("in-process model.score (trace for [1, None])", r["latency_general"]),
            path("in-process batched tf.function", None, r["throughput_batched"]),
            ratio("ratio SavedModel / in-process (static)", q.values(), q.values()),
            ratio("ratio SavedModel / in-process ([1, None])", g.values(), g.values()),
            path(f"SavedModel generate ({n} new tokens)", r["generate_saved"]),
            path(f"in-process lm.generate, graph loop ({n} new)", r["generate_local"]),
            ratio("ratio SavedModel / in-process (generate)", e.values(), [e["p50"]], "p50 "),
            [f"stress: {s['threads']} threads, {s['seconds']:.0f} s", s["calls"],
             f"calls, {s['calls_per_s']:.0f}/s, errors {s['errors']}, wrong answers {s['wrong_answers']}"
             + (f" (first: {s['first_error']})" if s["first_error"] else "")]])]
    return harness.text_table([("preset", -13), ("path", -44), ("p50 ms", 8), ("p99 ms", 8), ("batch-64 ms", 11),
                               ("sent/s", 8), ("", -1)], rows)


def main(argv):
    p = harness.parser("serving", __doc__)
    p.add_argument("--presets", default="gcnn-ptb,lstm-ptb,lstm-moe-ptb", help="comma-separated presets")
    for flag, default, what in (
            ("--latency-calls", 2000, "one-sentence calls per path"),
            ("--batch-calls", 30, "batch-64 calls per path"),
            ("--warmup", 5, "untimed calls of each path first"),
            ("--generate-calls", 100, "calls of the generate signature and of model.generate each"),
            ("--new-tokens", 20, "new tokens a generate call writes"),
            ("--threads", 8, "threads of the stress run"),
            ("--seconds", 30.0, "length of the stress run")):
        p.add_argument(flag, type=type(default), default=default, help=f"{what} (default {default:g})")
    p.add_argument("--small", action="store_true", help="smoke test: tiny configs of the presets")
    args = p.parse_args(argv)
    harness.at_least_one(args, "latency_calls", "batch_calls", "threads", "generate_calls", "new_tokens")
    if args.seconds <= 0 or args.warmup < 0:
        raise ValueError("--seconds must be > 0 and --warmup >= 0.")
    out = harness.header("serving", argv, args=vars(args))
    harness.cpu_tensorflow()
    print(f"machine: {harness.machine_summary()}; {harness.versions()}; TF threads: default; device CPU; random "
          f"weights{' (tiny configs)' if args.small else ''}", flush=True)
    results = [measure(preset, args) for preset in preset_list(args.presets)]
    print(f"\n{table(results)}\nload average at the end: {harness.load_average_text()}\n"
          "What each column means: docs/benchmarks.md#serving")
    return harness.report(args, {**out, "results": results})
