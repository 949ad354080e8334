"""`zoo benchmark serving`: the exported SavedModel against the in-process Keras model.

How it measures: docs/benchmarks.md#serving.
"""

import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import build_model
from zoo.tools.benchmarks.harness import fmt, percentile

DEFAULT_PRESETS = ("gcnn-ptb", "lstm-ptb", "lstm-moe-ptb")
WORDS_PER_SENTENCE = 20
BATCH = 64
TARGET_RATIO = 1.1
SEED = 0


def sentences(vocabulary, count, words=WORDS_PER_SENTENCE, seed=SEED):
    """`count` lines of `words` words drawn from the vocabulary (specials excluded)."""
    rng = np.random.default_rng(seed)
    pool = vocabulary.tokens[4:]
    return [" ".join(pool[i] for i in rng.integers(0, len(pool), size=words)) for _ in range(count)]


class InProcess:
    """The in-process model scoring text the way `serving_default` does."""

    def __init__(self, model):
        import tensorflow as tf

        self.model, self.tf = model, tf
        self.vocabulary = model.tokenizer
        # What `model.score`'s tf.function becomes once it has seen sentences of two lengths
        # (reduce_retracing generalises the time axis): the same graph, traced for [1, None].
        spec = tf.TensorSpec([1, None], tf.int32)
        self._general = tf.function(lambda ids, targets: model.head.target_log_prob(model(ids, training=False), targets),
                                    input_signature=[spec, spec], autograph=False)

    def score(self, texts):
        """The public API: one tf.function call per sentence (here always [1, 21]: a trace with
        static shapes)."""
        return self.model.score(texts)

    def score_general(self, texts):
        """`model.score` with its trace generalised to any sentence length, as varied traffic
        leaves it."""
        out = []
        for text in texts:
            ids = self.vocabulary.encode(text)
            x, y = self.tf.constant([ids[:-1]], self.tf.int32), self.tf.constant([ids[1:]], self.tf.int32)
            out.append(self._general(x, y).numpy()[0])
        return out

    def batched(self, texts):
        """Python tokenisation, one padded batch through the tf.function `score` uses."""
        rows = [self.vocabulary.encode(t) for t in texts]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), np.int32)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
        lengths = np.array([len(r) - 1 for r in rows])
        log_probs = self.model.target_log_probs(ids[:, :-1], ids[:, 1:])
        mask = np.arange(width - 1)[None, :] < lengths[:, None]
        token_log_probs = np.where(mask, log_probs, 0.0)
        total = token_log_probs.sum(axis=1)
        return {"token_log_probs": token_log_probs, "lengths": lengths, "log_prob": total,
                "perplexity": np.exp(-total / lengths)}


def measure(preset, args, log=print):
    import tensorflow as tf

    from zoo.export import export_saved_model

    model = build_model(preset, args.small)
    local = InProcess(model)
    one = sentences(model.tokenizer, 1, seed=SEED)
    batch = sentences(model.tokenizer, BATCH, seed=SEED + 1)
    # In-process functions traced before the SavedModel is loaded (warm-up).
    want_one = local.score(one)[0]
    np.testing.assert_allclose(local.score_general(one)[0], want_one, atol=1e-5)
    want_batch = local.batched(batch)
    with tempfile.TemporaryDirectory(prefix="zoo-bench-serving-") as base:
        export_s, path = harness.timed(export_saved_model, model, base, preset)
        size = harness.directory_bytes(path)
        serve = tf.saved_model.load(path).signatures["serving_default"]

        def served(texts):
            return {k: v.numpy() for k, v in serve(text=tf.constant(texts)).items()}

        got = served(one)
        np.testing.assert_allclose(got["token_log_probs"][0], want_one, atol=1e-5)
        got = served(batch)
        np.testing.assert_allclose(got["token_log_probs"], want_batch["token_log_probs"], atol=1e-5)
        log(f"  {preset}: exported in {export_s:.1f} s ({size / 2**20:.1f} MiB); SavedModel answers equal the "
            f"in-process model's to 1e-5", flush=True)

        for _ in range(args.warmup):
            served(one), local.score(one), local.score_general(one), served(batch), local.batched(batch)
        local.score(batch)
        def timed(paths):
            return {name: (lambda fn=fn: harness.timed(fn)[0]) for name, fn in paths.items()}

        latency = harness.interleaved(timed({"saved": lambda: served(one), "score": lambda: local.score(one),
                                             "general": lambda: local.score_general(one)}), args.latency_calls)
        throughput = harness.interleaved(timed({"saved": lambda: served(batch), "batched": lambda: local.batched(batch),
                                                "score": lambda: local.score(batch)}), args.batch_calls,
                                         # 64 calls each: every fifth round is enough for its median
                                         skip=lambda name, i: name == "score" and i % 5)
        generate = tf.saved_model.load(path).signatures["generate"]
        prompt = sentences(model.tokenizer, 1, words=10, seed=SEED + 2)
        settings = {"max_new_tokens": tf.constant(args.new_tokens), "temperature": tf.constant(0.8),
                    "top_k": tf.constant(40), "top_p": tf.constant(1.0), "seed": tf.constant(0),
                    "num_beams": tf.constant(1)}
        paths = {"saved": lambda: generate(text=tf.constant(prompt), **settings)["text"].numpy()[0].decode(),
                 "local": lambda: model.generate(prompt[0], max_new_tokens=args.new_tokens, temperature=0.8, top_k=40,
                                                 seed=0, jit_compile=False)}
        written = {name: fn() for name, fn in paths.items()}
        if written["saved"] != written["local"]:
            raise AssertionError(f"generate: the SavedModel wrote {written['saved']!r}, in process {written['local']!r}")
        for _ in range(args.warmup):
            paths["saved"](), paths["local"]()
        generating = harness.interleaved(timed(paths), args.generate_calls)
        log(f"  {preset}: latency, throughput and generate measured; {args.threads} threads for {args.seconds:g} s ...",
            flush=True)
        stress = run_stress(served, one, want_one, args.threads, args.seconds)

    result = {"preset": preset, "params": int(model.count_params()), "export_s": export_s, "size_bytes": size}
    for name, times in latency.items():
        result[f"latency_{name}"] = {"p50_s": percentile(times, 50), "p99_s": percentile(times, 99),
                                     "calls": len(times)}
    for name, times in throughput.items():
        median = statistics.median(times)
        result[f"throughput_{name}"] = {"median_s": median, "sentences_per_s": BATCH / median, "calls": len(times)}
    best_local = min(result["throughput_batched"]["median_s"], result["throughput_score"]["median_s"])
    result["ratios"] = {
        "latency_p50": result["latency_saved"]["p50_s"] / result["latency_score"]["p50_s"],
        "latency_p99": result["latency_saved"]["p99_s"] / result["latency_score"]["p99_s"],
        "batch": result["throughput_saved"]["median_s"] / best_local,
    }
    result["ratios_general"] = {
        "latency_p50": result["latency_saved"]["p50_s"] / result["latency_general"]["p50_s"],
        "latency_p99": result["latency_saved"]["p99_s"] / result["latency_general"]["p99_s"],
    }
    for name, times in generating.items():
        result[f"generate_{name}"] = {"p50_s": percentile(times, 50), "p99_s": percentile(times, 99),
                                      "calls": len(times), "new_tokens": args.new_tokens}
    result["ratios_generate"] = {
        "p50": result["generate_saved"]["p50_s"] / result["generate_local"]["p50_s"],
        "p99": result["generate_saved"]["p99_s"] / result["generate_local"]["p99_s"],
    }
    result["stress"] = stress
    return result


def run_stress(served, texts, want, threads, seconds):
    """`threads` threads calling `served(texts)` for `seconds`; answers checked against `want`."""
    stop = time.perf_counter() + seconds
    counts, errors, wrong = [0] * threads, [], [0] * threads

    def worker(i):
        while time.perf_counter() < stop:
            try:
                out = served(texts)
                if not np.allclose(out["token_log_probs"][0], want, atol=1e-5) or \
                        not np.all(np.isfinite(out["perplexity"])):
                    wrong[i] += 1
                counts[i] += 1
            except Exception as e:  # counted and reported, never raised: the point is to count them
                errors.append(f"{type(e).__name__}: {e}")
                counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - start
    return {"threads": threads, "seconds": wall, "calls": sum(counts), "calls_per_s": sum(counts) / wall,
            "errors": len(errors), "first_error": errors[0] if errors else None, "wrong_answers": sum(wrong)}


def print_table(results, log=print):
    def path(label, lat, thr=None):
        return [label, fmt(lat["p50_s"] * 1e3, ".2f") if lat else "-", fmt(lat["p99_s"] * 1e3, ".2f") if lat else "-",
                f"{thr['median_s'] * 1e3:.1f}" if thr else "-", f"{thr['sentences_per_s']:.0f}" if thr else "-"]

    def ratio(label, p50, p99, batch, checked, what=""):
        return [label, f"{p50:.2f}", f"{p99:.2f}", "" if batch is None else f"{batch:.2f}", "",
                f" {what}<= {TARGET_RATIO}: {'yes' if max(checked) <= TARGET_RATIO else 'NO'}"]

    rows = []
    for r in results:
        q, g, n, s = r["ratios"], r["ratios_general"], r["generate_saved"]["new_tokens"], r["stress"]
        rows += [[r["preset"], *path("SavedModel serving_default", r["latency_saved"], r["throughput_saved"])],
                 ["", *path("in-process model.score (static [1, 21] trace)", r["latency_score"], r["throughput_score"])],
                 ["", *path("in-process model.score (trace for [1, None])", r["latency_general"])],
                 ["", *path("in-process batched tf.function", None, r["throughput_batched"])],
                 ["", *ratio("ratio SavedModel / in-process (static)", q["latency_p50"], q["latency_p99"], q["batch"],
                             q.values())],
                 ["", *ratio("ratio SavedModel / in-process ([1, None])", g["latency_p50"], g["latency_p99"], None,
                             g.values())],
                 ["", *path(f"SavedModel generate ({n} new tokens)", r["generate_saved"])],
                 ["", *path(f"in-process lm.generate, graph loop ({n} new)", r["generate_local"])],
                 ["", *ratio("ratio SavedModel / in-process (generate)", r["ratios_generate"]["p50"],
                             r["ratios_generate"]["p99"], None, [r["ratios_generate"]["p50"]], "p50 ")],
                 ["", f"stress: {s['threads']} threads, {s['seconds']:.0f} s", s["calls"],
                  f"calls, {s['calls_per_s']:.0f}/s, errors {s['errors']}, wrong answers {s['wrong_answers']}"
                  + (f" (first: {s['first_error']})" if s["first_error"] else "")]]
    log(harness.text_table([("preset", -13), ("path", -44), ("p50 ms", 8), ("p99 ms", 8), ("batch-64 ms", 11),
                            ("sent/s", 8), ("", -1)], rows))


def parse(argv):
    p = harness.parser("serving", __doc__)
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated presets")
    p.add_argument("--latency-calls", type=int, default=2000, help="one-sentence calls per path (default 2000: enough calls for a steady p99)")
    p.add_argument("--batch-calls", type=int, default=30,
                   help="batch-64 calls of the SavedModel and of the batched in-process path (default 30; "
                        "model.score, 64 calls each, in every fifth round)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls of each path first (default 5)")
    p.add_argument("--generate-calls", type=int, default=100,
                   help="calls of the generate signature and of model.generate each (default 100)")
    p.add_argument("--new-tokens", type=int, default=20, help="new tokens a generate call writes (default 20)")
    p.add_argument("--threads", type=int, default=8, help="threads of the stress run (default 8)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of the stress run (default 30)")
    p.add_argument("--small", action="store_true", help="smoke test: tiny configs of the presets")
    args = p.parse_args(argv)
    harness.at_least_one(args, "latency_calls", "batch_calls", "threads", "generate_calls", "new_tokens")
    if args.seconds <= 0 or args.warmup < 0:
        raise ValueError("--seconds must be > 0 and --warmup >= 0.")
    return args


def main(argv):
    args = parse(argv)
    presets = [s.strip() for s in args.presets.split(",") if s.strip()]
    out = harness.header("serving", argv, args=vars(args))
    harness.cpu_tensorflow()
    print(f"serving: serving_default of the exported SavedModel (loaded with tf.saved_model.load in this "
          f"process) against the in-process model on the same text; {WORDS_PER_SENTENCE}-word sentences of "
          f"random vocabulary words (seed {SEED}); random weights{' (tiny configs)' if args.small else ''}")
    print(f"machine: {harness.machine_summary()}; {harness.versions()}; TF threads: default; device CPU")
    print(f"calls: {args.warmup} warm-up each, then latency {args.latency_calls} x 1 sentence and throughput "
          f"{args.batch_calls} x {BATCH} sentences per path, paths interleaved; stress {args.threads} threads x "
          f"{args.seconds:g} s", flush=True)
    results = [measure(preset, args) for preset in presets]
    print()
    print_table(results)
    print(f"load average at the end: {harness.load_average_text()} (other processes share "
          f"the {os.cpu_count()} CPUs: timings move with them; the interleaving keeps the ratios fair)")
    print(f"ratios: SavedModel time / in-process time (p50 and p99 of one sentence against model.score, its "
          f"tf.function traced for [1, 21] only (static shapes, as when every sentence has 20 words) or for "
          f"[1, None] (as after sentences of two lengths); batch against the faster in-process path); target "
          f"<= {TARGET_RATIO}. The SavedModel's signature has [None] inputs, as TF Serving needs.")
    return harness.report(args, {**out, "results": results})


if __name__ == "__main__":
    main(sys.argv[1:])
