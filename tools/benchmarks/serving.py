"""The served-model benchmarks, sharing their exports and their TensorFlow-only child processes:
`serving` (`main`), `served-generate`, `serving-threads`, `serving-memory` and `warmup`, each
`zoo benchmark NAME`. How each measures: docs/benchmarks.md#NAME.
"""

import contextlib
import functools
import json
import os
import pathlib
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import build_model, preset_list, with_stand_in_vocabulary

BATCH, TARGET_RATIO = 64, 1.1
FLOOR, SIDES = "the step alone", ("baseline", "this version")
FLOOR_PROMPT = (1, 5, 6, 7, 8, 9)  # <s> and five ids: the length of the benchmark's prompt
# (label, intra-op threads, inter-op threads): 0 is the server's default, one thread per core; an
# inter-op count below 0 runs every op in the thread of the request that needs it
SETTINGS = (("server defaults (0, 0)", 0, 0), ("intra 1, inter 1", 1, 1), ("intra 1, inter -1", 1, -1),
            ("intra 0, inter -1", 0, -1))
MEMORY_KEYS = ("preset", "parameters", "weights", "export_bytes", "runs")
TIME_KEYS = ("load_s", "replay_s", "serving_default_s", "generate_s")  # of a fresh process: warmup's
RSS_KEYS = ("imported_rss", "loaded_rss", "served_rss", "peak_rss")  # serving-memory's
CALLS = ("--calls", 9, "timed requests of each kind per process (default 9)")
NEW_TOKENS = ("--new-tokens", 100, "new tokens per generate request (default 100)")

# A fresh process that loads an export into a session as the model server does, with its thread pools:
# the median seconds of `generate` and 64-sentence `serving_default` requests (served-generate, serving-threads).
SESSION_CHILD = r"""
import statistics
import tensorflow as tf
from tensorflow.compat import v1
v1.disable_eager_execution()
export, intra, inter, calls, new, top_k = sys.argv[1], *map(int, sys.argv[2:7])
config = v1.ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
session = v1.Session(graph=tf.Graph(), config=config)
with session.graph.as_default():
    signatures = v1.saved_model.loader.load(session, ["serve"], export).signature_def
requests = {"generate": {"text": ["the company said that it"], "max_new_tokens": new, "temperature": 0.8,
                         "top_k": top_k, "top_p": 1.0, "seed": 0, "num_beams": 1},
            "serving_default": {"text": ["the company said it would buy the stock of its rival for cash"] * 64}}
out = {}
for key, values in requests.items():
    if key not in signatures:  # an export with generate alone (served-generate --floor)
        continue
    sig = signatures[key]
    fetch = {k: v.name for k, v in sig.outputs.items()}
    feed = {sig.inputs[k].name: v for k, v in values.items() if k in sig.inputs}
    result = [session.run(fetch, feed) for _ in range(2)][-1]
    out[key + "_s"] = statistics.median(harness.timed(session.run, fetch, feed)[0] for _ in range(calls))
    if key == "generate":
        out.update(new_tokens=int(result["lengths"][0]), completion=result["completion"][0].decode())
print(json.dumps(out))
"""

# A fresh process's first requests after loading an export (eagerly): the seconds of the import, the load, the replay
# of its warmup records (argv[2] 1) and each request, and its memory after each stage (warmup, serving-memory).
FIRST_CALLS_CHILD = r"""
import contextlib
load_s, tf = harness.timed(__import__, "tensorflow")
with contextlib.suppress(ImportError):
    import tensorflow_text  # noqa: F401  (a subword export's tokenizer ops)
out = {"imported_rss": harness.status_kib("VmRSS") * 1024}
seconds, loaded = harness.timed(tf.saved_model.load, sys.argv[1])
out.update(load_s=load_s + seconds, loaded_rss=harness.status_kib("VmRSS") * 1024)

def replay():
    from tensorflow_serving.apis import prediction_log_pb2
    for record in tf.data.TFRecordDataset(sys.argv[1] + "/assets.extra/tf_serving_warmup_requests"):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        loaded.signatures[request.model_spec.signature_name](
            **{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})

out["replay_s"] = harness.timed(replay)[0] if sys.argv[2] == "1" else 0.0
text = tf.constant(["the company said it would buy the stock"] * int(sys.argv[3]))
out["serving_default_s"] = harness.timed(
    lambda: loaded.signatures["serving_default"](text=text)["perplexity"].numpy())[0]
out["generate_s"] = harness.timed(
    lambda: harness.generate_request(loaded, ["the company said"], 20)["text"].numpy())[0]
harness.answer(lambda: {**out, "served_rss": harness.status_kib("VmRSS") * 1024,
                        "peak_rss": harness.status_kib("VmHWM") * 1024})
"""


def session_run(export, intra, inter, calls, new_tokens, top_k=40):
    """One fresh process's medians (seconds) for one thread setting (`SESSION_CHILD`)."""
    return harness.python_child(SESSION_CHILD, [export, intra, inter, calls, new_tokens, top_k],
                                f"the process with intra {intra}, inter {inter}")


def first_calls(export, replay=False, memory=False):
    """One fresh process's `FIRST_CALLS_CHILD` seconds (warmup's), or with `memory` its resident bytes."""
    what = f"the process serving {export}" if memory else f"the {'warm' if replay else 'cold'} process"
    found = harness.python_child(FIRST_CALLS_CHILD, [export, int(replay), 32 if memory else 8], what, timeout=900)
    return {key: found[key] for key in (RSS_KEYS if memory else TIME_KEYS)}


memory_run = functools.partial(first_calls, memory=True)  # serving-memory's


@contextlib.contextmanager
def exported(model, prefix, name="model", **options):
    """`(seconds, path)` of `model`'s SavedModel (`export_saved_model`'s `options`) in a temporary folder."""
    from zoo.export import export_saved_model

    with tempfile.TemporaryDirectory(prefix=prefix) as base:
        yield harness.timed(export_saved_model, model, base, name, **options)


def medians(runs, scale=1):
    """`{key: the median of the per-process results `runs`' number under key, times `scale`}`."""
    return {k: statistics.median(r[k] for r in runs) * scale for k, x in runs[0].items() if not isinstance(x, str)}


def fresh_processes(repeats, each, *flags, counts=()):
    """`zoo benchmark NAME` of `run(args)` (`flags`: `(flag, default, help[, add_argument's keywords])`): its
    `(table, tail, results)` printed after the CPU, the load averages and the repeats, and reported with them."""
    def benchmark(run):
        @functools.wraps(run)
        def main(argv=None):
            p = harness.parser(run.__name__.replace("_", "-"), run.__doc__, repeats,
                               f"fresh processes {each} (default {repeats})")
            for flag, value, text, *more in flags:
                kind = {"action": "store_true"} if value is False else {"type": str if value is None else type(value)}
                p.add_argument(flag, default=value, help=text, **{**kind, **dict(*more)})
            args = p.parse_args(argv)
            harness.at_least_one(args, "repeats", *counts)
            start, done = harness.load_average_text(), run(args)
            if done:
                rendered, tail, results = done
                print(f"{harness.cpu_model()}, load average {start} at the start, {harness.load_average_text()} at "
                      f"the end; medians of {args.repeats} fresh processes {each}{tail}")
                return harness.report(args, {"cpu": harness.cpu_model(), "repeats": args.repeats, **results,
                                             "table": rendered}, rendered)
        return main
    return benchmark


# ---- serving: the exported SavedModel against the in-process Keras model ------------------------
def sentences(vocabulary, count, words=20, seed=0):
    """`count` lines of `words` words drawn from the vocabulary (specials excluded)."""
    rng, pool = np.random.default_rng(seed), vocabulary.tokens[4:]
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
    return {"p50_s": harness.percentile(times, 50), "p99_s": harness.percentile(times, 99), "calls": len(times), **more}


def rate(times):
    return {"median_s": statistics.median(times), "sentences_per_s": BATCH / statistics.median(times),
            "calls": len(times)}


def measure(preset, args):
    import tensorflow as tf

    model = build_model(preset, args.small)
    general, batched = in_process(model)
    one, batch = sentences(model.tokenizer, 1), sentences(model.tokenizer, BATCH, seed=1)
    want_one = model.score(one)[0]  # the in-process functions traced before the SavedModel is loaded
    np.testing.assert_allclose(general(one)[0], want_one, atol=1e-5)
    want_batch = batched(batch)["token_log_probs"]
    with exported(model, "zoo-bench-serving-", preset) as (export_s, path):
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
        return [label, *(harness.fmt(lat and lat[q] * 1e3, ".2f") for q in ("p50_s", "p99_s")),
                harness.fmt(thr and thr["median_s"] * 1e3, ".1f"), harness.fmt(thr and thr["sentences_per_s"], ".0f")]

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
    """`zoo benchmark serving`: the exported SavedModel against the in-process Keras model."""
    p = harness.parser("serving", main.__doc__)
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


# ---- served-generate: this version's exported generate against an earlier version's --------------
def exports_of(base, presets, seed, head_blocks=None, floor=False):
    """`{preset: this version's export under `base`}` (random weights after set_random_seed(seed)), or with `floor`
    its `floor_export` in `head_blocks[preset]` blocks."""
    import keras

    import zoo
    from zoo.export import export_saved_model

    out = {}
    for preset in presets:  # a preset of the paper's size has no vocabulary here: a stand-in of its size
        keras.utils.set_random_seed(seed)
        model = zoo.load(preset)
        out[preset] = (floor_export(model, os.path.join(base, "floor", preset), head_blocks[preset]) if floor else
                       export_saved_model(with_stand_in_vocabulary(model), base, preset, head_blocks=head_blocks))
    return out


def floor_export(model, path, head_blocks):
    """A SavedModel whose `generate(text, max_new_tokens)` runs only `max_new_tokens` steps of `model.step`, its output
    layer (in `head_blocks` blocks) and an argmax after `FLOOR_PROMPT`: `lengths` and `completion` (the last id)."""
    import tensorflow as tf

    from zoo.export.saved_model import saved_variables
    from zoo.models import generation

    def generate(text, max_new_tokens):
        ids = tf.constant([FLOOR_PROMPT], tf.int32)
        with generation.loop_invariants(model), generation._head_in_blocks(model, head_blocks):
            hidden, state = generation.prefill(model, ids, tf.constant([len(FLOOR_PROMPT)], tf.int32))

            def body(step, token, hidden, state):
                token = tf.argmax(generation.next_token_scores(model, hidden, False), -1, output_type=tf.int32)
                hidden, state = model.step(token, state)
                return step + 1, token, hidden, state

            _, token, _, _ = tf.while_loop(lambda step, *_: step < max_new_tokens, body,
                                           (tf.constant(0), tf.zeros([1], tf.int32), hidden, state))
        return {"lengths": tf.fill([1], max_new_tokens), "completion": tf.strings.as_string(token)}

    root = tf.Module()
    with saved_variables(model) as root.model_variables:  # as the exports save them: no norm per request
        root.generate = tf.function(generate, autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name="text"), tf.TensorSpec([], tf.int32, name="max_new_tokens")])
        tf.saved_model.save(root, path, signatures={"generate": root.generate})  # step and prefill track no metrics
    return path


def baseline_export(directory, preset):
    """The newest version of `preset`'s export under the baseline `directory`, or a ValueError."""
    folder = os.path.join(directory, preset)
    found = [v for v in (os.listdir(folder) if os.path.isdir(folder) else ()) if v.isdigit()
             and os.path.exists(os.path.join(folder, v, "saved_model.pb"))]
    if not found:
        raise ValueError(f"--baseline {directory!r} holds no export of {preset} ({folder}/<version>/saved_model.pb); "
                         "make it with the earlier version's code (docs/benchmarks.md#served-generate).")
    return os.path.join(folder, max(found, key=int))


def rates(sides):
    """`{side: median new tokens/s of its runs}`."""
    return {side: harness.median_rate(runs, "new_tokens", "generate_s") for side, runs in sides.items()}


def generate_table(results):
    """Markdown rows from `{preset: {"baseline": [runs], "this version": [runs]}}`."""
    def cells(x):
        return [f"{x['baseline']:,.0f}", f"{x['this version']:,.0f}", f"{x['this version'] / x['baseline']:.2f}×"]

    rows = [[f"`{preset}`", *cells(rates(sides)),
             *cells({s: BATCH / medians(sides[s])["serving_default_s"] for s in SIDES})]
            for preset, sides in results.items()]
    return harness.markdown_table(["preset", "`generate` batch 1, new tokens/s: baseline:", "this version:",
                                   "× baseline:", "`serving_default` 64 lines, lines/s: baseline:", "this version:",
                                   "× baseline:"], rows)


def floor_table(results):
    """Markdown rows of `--floor`: each side's new tokens/s (µs per new token), the step alone against both."""
    speeds = {preset: rates(sides) for preset, sides in results.items()}
    rows = [[f"`{preset}`", *(f"{speed[s]:,.0f} ({1e6 / speed[s]:.0f})" for s in (*SIDES, FLOOR)),
             f"{speed[FLOOR] / speed['baseline']:.2f}×", f"{speed['this version'] / speed[FLOOR]:.0%}"]
            for preset, speed in speeds.items()]
    return harness.markdown_table(["preset", "baseline: new tokens/s (µs each):", "this version:", "the step alone "
                                   "(`step`, output layer, argmax):", "the step alone × baseline:",
                                   "this version / the step alone:"], rows)


@fresh_processes(5, "of each side per preset",
                 ("--baseline", None, "a directory of the earlier version's exports, <preset>/<version>"),
                 ("--write-exports", None, "only write this version's exports into DIR and stop", {"metavar": "DIR"}),
                 ("--presets", "gcnn-ptb,lstmp-ptb", "comma-separated presets (default: %(default)s)"),
                 ("--seed", 0, "the random weights' seed, on both sides (default 0)"), CALLS, NEW_TOKENS,
                 ("--top-k", 40, "generate's top_k, at temperature 0.8 (default 40)"),
                 ("--head-blocks", None, "this version's exports with zoo export --head-blocks N (default: zoo "
                  "export's)", {"type": int, "metavar": "N"}),
                 ("--floor", False, "also time the model's step, output layer and argmax alone"),
                 counts=("calls", "new_tokens", "head_blocks"))
def served_generate(args):
    """`zoo benchmark served-generate`: the exported `generate` at batch 1, as the model server runs it
    with its default flags, against the exports of an earlier version of the zoo, side by side."""
    presets = [name.strip() for name in args.presets.split(",") if name.strip()]
    if not presets:
        raise ValueError(f"--presets must name at least one preset, got {args.presets!r}.")
    if args.write_exports and args.floor:
        raise ValueError("--floor times a third side beside a baseline; it does not apply to --write-exports.")
    if args.write_exports:
        for preset, path in exports_of(args.write_exports, presets, args.seed, args.head_blocks).items():
            print(f"{preset}: {path}")
        return
    if not args.baseline:
        raise ValueError("--baseline is required: a directory of the earlier version's exports "
                         "(or --write-exports DIR to make this version's).")
    baselines, results = {preset: baseline_export(args.baseline, preset) for preset in presets}, {}
    with tempfile.TemporaryDirectory(prefix="zoo-served-") as base:
        current = exports_of(base, presets, args.seed, args.head_blocks)
        blocks = {preset: json.loads(pathlib.Path(path, "assets.extra", "zoo_export.json").read_text())["head_blocks"]
                  for preset, path in current.items()}
        floors = exports_of(base, presets, args.seed, blocks, floor=True) if args.floor else {}
        for preset in presets:
            exports = {"baseline": baselines[preset], "this version": current[preset], FLOOR: floors.get(preset)}
            results[preset] = harness.interleaved(
                {side: (lambda e=export: session_run(e, 0, 0, args.calls, args.new_tokens, args.top_k))
                 for side, export in exports.items() if export}, args.repeats)
            print(f"  {preset}: " + ", ".join(f"{side} {r:,.0f} tok/s" for side, r in rates(results[preset]).items()),
                  flush=True)
    from zoo.models.generation import l2_cache_bytes

    same = {preset: len({r["completion"] for side in SIDES for r in sides[side]}) == 1
            for preset, sides in results.items()}
    tail = (f", {args.calls} requests each; both sides wrote the same text: "
            + ", ".join(f"{preset} {'yes' if ok else 'NO'}" for preset, ok in same.items())
            + "; this version's output layer in "
            + ", ".join(f"{n} block{'s' * (n > 1)} ({preset})" for preset, n in blocks.items())
            + f", level-2 cache {l2_cache_bytes()} bytes per core")
    rendered = generate_table(results) + ("\n\n" + floor_table(results) if args.floor else "")
    return rendered, tail, {"presets": presets, "baseline": baselines, "seed": args.seed, "calls": args.calls,
                            "new_tokens": args.new_tokens, "top_k": args.top_k, "head_blocks": blocks,
                            "l2_cache_bytes": l2_cache_bytes(), "same_text": same, "results": results}


# ---- serving-threads: the model server's thread pools ----------------------------------------------
def threads_table(results, new_tokens):
    """Markdown rows from `{label: [per-process results]}`, the first label being the baseline."""
    rows, base = [], None
    for name, runs in results.items():
        m = medians(runs)
        gen, score = new_tokens / m["generate_s"], BATCH / m["serving_default_s"]
        base = base or (gen, score)
        rows.append([name, f"{gen:,.0f}", f"{gen / base[0]:.2f}×", f"{score:,.0f}", f"{score / base[1]:.2f}×"])
    return harness.markdown_table(["thread pools (intra, inter)", "`generate` batch 1, new tokens/s:", "× defaults:",
                                   "`serving_default` 64 lines, lines/s:", "× defaults:"], rows)


@fresh_processes(5, "of each setting", ("--preset", "gcnn-ptb", "a preset (random weights) or a preset directory"),
                 CALLS, NEW_TOKENS, counts=("calls", "new_tokens"))
def serving_threads(args):
    """`zoo benchmark serving-threads`: an export served with the model server's default thread pools
    against smaller ones, for batch-1 `generate` and a batched `serving_default`."""
    import zoo

    with exported(zoo.load(args.preset), "zoo-threads-", max_new_tokens=args.new_tokens) as (_, export):
        results = harness.interleaved({name: (lambda s=s: session_run(export, *s, args.calls, args.new_tokens))
                                       for name, *s in SETTINGS}, args.repeats)  # the defaults first: the base
    short = [(name, r["new_tokens"]) for name, runs in results.items() for r in runs
             if r["new_tokens"] != args.new_tokens]
    if short:
        raise RuntimeError(f"{short[0][0]}: generate wrote {short[0][1]} tokens, not {args.new_tokens}.")
    same = len({r["completion"] for runs in results.values() for r in runs}) == 1
    tail = f" ({args.preset}), {args.calls} requests each; every setting wrote the same text: {'yes' if same else 'NO'}"
    return threads_table(results, args.new_tokens), tail, {"preset": args.preset, "calls": args.calls,
                                                           "new_tokens": args.new_tokens, "same_text": same,
                                                           "results": results}


# ---- serving-memory: what one served model costs in memory --------------------------------------------
def memory_table(rows):
    """Markdown rows from `[(preset, parameters, weights, export bytes, [per-process results])]`."""
    out = []
    for preset, parameters, weights, size, runs in rows:
        mib = medians(runs, 2 ** -20)
        out.append([f"`{preset}`", f"{parameters:,}", weights, f"{size / 2 ** 20:,.1f}",
                    *(f"{mib[key] - mib['imported_rss']:,.1f}" for key in ("loaded_rss", "served_rss")),
                    f"{mib['peak_rss']:,.1f}"])
    return harness.markdown_table(["preset", "parameters:", "weights", "export on disk (MiB):",
                                   "the model, once loaded (MiB):", "after its first requests (MiB):",
                                   "process peak (MiB):"], out)


@fresh_processes(3, "per preset", ("--presets", "gcnn-ptb,gcnn-ptb-deep,lstmp-ptb,gcnn-en",
                                   "comma-separated presets or preset directories (default %(default)s)"))
def serving_memory(args):
    """`zoo benchmark serving-memory`: what one served model costs in memory, per preset."""
    import zoo
    from zoo.weights import trained_presets

    rows = []
    for preset in preset_list(args.presets):
        trained = not os.path.isdir(preset) and preset in trained_presets()
        model = zoo.load(preset, weights="trained" if trained else None)
        with exported(model, "zoo-memory-", preset.replace("/", "_")) as (_, export):
            runs = [memory_run(export) for _ in range(args.repeats)]
            rows.append((preset, model.count_params(), "trained" if trained else "random",
                         harness.directory_bytes(export), runs))
        print(f"  {preset}: {(runs[-1]['served_rss'] - runs[-1]['imported_rss']) / 2 ** 20:,.1f} MiB", flush=True)
    return (memory_table(rows), " (resident memory above a process that has imported TensorFlow):",
            {"rows": [dict(zip(MEMORY_KEYS, r)) for r in rows]})


# ---- warmup: the first requests after a fresh load, without and with the warmup records ------------
def warmup_table(cold, warm):
    """Markdown rows: the medians of each first request, cold and warm, and their ratio."""
    cold, warm = medians(cold, 1e3), medians(warm, 1e3)
    rows = [[label, f"{cold[key]:,.1f}", f"{warm[key]:,.1f}", f"{cold[key] / warm[key]:.1f}×"]
            for key, label in (("serving_default_s", "`serving_default`, 8 sentences"),
                               ("generate_s", "`generate`, 1 prompt, 20 greedy tokens"))]
    rows.append(["(replaying the warmup records at load)", "—", f"{warm['replay_s']:,.0f}", ""])
    return harness.markdown_table(["first request after a fresh load", "without warmup (ms):",
                                   "with warmup replayed (ms):", "ratio:"], rows)


@fresh_processes(5, "of each kind", ("--preset", "gcnn-ptb", "a preset with trained weights, or a preset directory"))
def warmup(args):
    """`zoo benchmark warmup`: the latency of the first `serving_default` and `generate` requests
    after a fresh load of an export, without and with its warmup records
    (`assets.extra/tf_serving_warmup_requests`) replayed first, as TF Serving replays them."""
    import zoo

    model = zoo.load(args.preset, weights=None if os.path.isdir(args.preset) else "trained")
    with exported(model, "zoo-warmup-") as (_, export):
        runs = harness.interleaved({"cold": lambda: first_calls(export), "warm": lambda: first_calls(export, True)},
                                   args.repeats)
    return warmup_table(runs["cold"], runs["warm"]), f" ({args.preset}):", {"preset": args.preset, **runs}
