"""`zoo benchmark int8`: each preset in float32 and in int8 (`lm.quantize("int8")`), side by side.

How it measures: docs/benchmarks.md#int8.
"""

import os
import tempfile

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import preset_list, with_stand_in_vocabulary

DEFAULT_PRESETS = ("gcnn-ptb", "gcnn-ptb-deep", "lstmp-ptb", "gcnn-en")
SENTENCE = "the company said it would buy the stock of the bank for about one billion dollars in cash next year"
REQUESTS = ("serving_default_1", "serving_default_32", "generate_1")

CHILD = r"""
import contextlib
import tensorflow as tf
with contextlib.suppress(ImportError):
    import tensorflow_text  # noqa: F401  (a subword export's tokenizer ops)
paths, calls, new_tokens, sentence = sys.argv[1:3], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
models = [tf.saved_model.load(p) for p in paths]
requests = {
    "serving_default_1": lambda m: m.signatures["serving_default"](text=tf.constant([sentence])),
    "serving_default_32": lambda m: m.signatures["serving_default"](text=tf.constant([sentence] * 32)),
    "generate_1": lambda m: harness.generate_request(m, ["the company said"], new_tokens),
}
print(json.dumps({name: [side["median_s"] for side in harness.measure(
    {j: (lambda m=m: request(m)) for j, m in enumerate(models)}, calls, warmup=2).values()]
    for name, request in requests.items()}))
"""

KERNELS_CHILD = r"""
import numpy as np
import tensorflow as tf
from tensorflow.compat import v1
v1.disable_eager_execution()
d, n, loops, repeats = map(int, sys.argv[1:5])
rng = np.random.default_rng(0)
graph = tf.Graph()
with graph.as_default():
    w = rng.normal(size=(d, n)).astype(np.float32) * 0.1
    q8 = tf.constant(rng.integers(-127, 128, size=(d, n)).astype(np.int8))
    w32, w16 = tf.Variable(w), tf.cast(tf.Variable(w), tf.bfloat16)  # bfloat16: cast once, before the loop

    def int8_batch_matmul(x):
        xq = tf.cast(tf.clip_by_value(tf.round(x * 16.0), -127, 127), tf.int8)
        return tf.cast(tf.raw_ops.BatchMatMulV3(x=xq, y=q8, Tout=tf.int32), tf.float32)

    def quantized_matmul(x):
        xq, lo, hi = tf.raw_ops.QuantizeV2(input=x, min_range=-8.0, max_range=8.0, T=tf.quint8, mode="MIN_FIRST")
        b = tf.bitcast(q8, tf.quint8)  # in the loop: a loop cannot carry a quint8 tensor
        out, olo, ohi = tf.raw_ops.QuantizedMatMul(a=xq, b=b, min_a=lo, max_a=hi, min_b=0.0, max_b=1.0,
                                                   Toutput=tf.qint32)
        return tf.raw_ops.Dequantize(input=out, min_range=olo, max_range=ohi, mode="MIN_FIRST")

    products = {
        "float32 MatMul": lambda x: tf.matmul(x, w32),
        "bfloat16 MatMul (weights cast once)": lambda x: tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), w16), tf.float32),
        "int8 x int8 -> int32 BatchMatMulV3": int8_batch_matmul,
        "quint8 QuantizedMatMul (QuantizeV2, Dequantize)": quantized_matmul,
    }
    fetches = {}
    for name, product in products.items():  # each product feeds the next: one row at a time, as decoding
        body = lambda i, x, product=product: (i + 1, x + 1e-6 * tf.reduce_max(product(x)))
        fetches[name] = tf.while_loop(lambda i, x: i < loops, body, (0, tf.ones([1, d])))[1]
    init = v1.global_variables_initializer()
session = v1.Session(graph=graph)
session.run(init)
timed = harness.measure({name: (lambda f=f: session.run(f)) for name, f in fetches.items()}, repeats, warmup=3)
print(json.dumps({name: side["median_s"] / loops for name, side in timed.items()}))
"""


def kernels(d, n, loops=200, repeats=11):
    """Seconds per `[1, d] × [d, n]` product of each kernel TensorFlow ships for float32, bfloat16
    and int8 weights, in a fresh process (docs/benchmarks.md#int8)."""
    return harness.python_child(KERNELS_CHILD, [d, n, loops, repeats], "the kernels process")


def kernel_table(times):
    base = times["float32 MatMul"]
    return harness.markdown_table(["product", "µs per product:", "× float32:"],
                                  [[name, f"{t * 1e6:,.0f}", f"{t / base:.2f}×"] for name, t in times.items()])


def test_lines(preset, english):
    from zoo.data.corpus import read_lines

    if preset == "gcnn-en" and not os.path.isfile(os.path.join(english, "test.txt")):
        raise ValueError(f"gcnn-en's test set is the test split of the English corpus, and {english!r} has no "
                         "test.txt; build it with `python -m zoo.tools.corpora english DIR` and give --english DIR.")
    return read_lines(english if preset == "gcnn-en" else "ptb", "test")


def served(exports, calls, new_tokens):
    """p50 seconds of each of `REQUESTS`, `[float32, int8]`, from one fresh TensorFlow-only process."""
    return harness.python_child(CHILD, [*exports, calls, new_tokens, SENTENCE], f"the process serving {exports}")


def side_by_side(model, name, args, lines=None):
    """`model` in float32, then quantized in place to int8: each one's per-word perplexity on `lines` (if
    given) and export sizes (`export` whole, `variables`, `graph`), and the two exports' `served` p50s."""
    from zoo.export import export_saved_model

    out, exports = {"ppl": [], "export": [], "variables": [], "graph": []}, []
    with tempfile.TemporaryDirectory(prefix="zoo-int8-") as base:
        for kind in ("float32", "int8"):
            if kind == "int8":
                model.quantize("int8")
            if lines is not None:
                out["ppl"].append(float(model.perplexity(lines, per="word")))
            exports.append(export_saved_model(model, base, f"{name}-{kind}"))
            out["export"].append(harness.directory_bytes(exports[-1]))
            out["variables"].append(harness.directory_bytes(os.path.join(exports[-1], "variables")))
            out["graph"].append(os.path.getsize(os.path.join(exports[-1], "saved_model.pb")))
        return {**out, "served": served(exports, args.calls, args.new_tokens)}


def table(rows):
    def pair(f, q, scale=1e3, digits=1):
        return f"{f * scale:,.{digits}f} → {q * scale:,.{digits}f}"

    return harness.markdown_table(
        ["preset", "test per-word perplexity, float32 → int8", "change:", "export (MiB), float32 → int8",
         "export ratio:", "variables ratio:", "`serving_default` ×1 p50 (ms)", "×32 p50 (ms)",
         "`generate` batch 1 p50 (ms)"],
        [[f"`{r['preset']}`", pair(*r["ppl"], 1, 2), f"{r['ppl'][1] / r['ppl'][0] - 1:+.2%}",
          pair(*r["export"], 2 ** -20), f"{r['export'][1] / r['export'][0]:.1%}",
          f"{r['variables'][1] / r['variables'][0]:.1%}",
          *(f"{pair(*r['served'][name])} ({r['served'][name][1] / r['served'][name][0]:.2f}×)" for name in REQUESTS)]
         for r in rows])


def paper_size(args):
    """`--paper-size PRESET`: the exports' sizes and served p50s of a random-weight model."""
    import keras

    import zoo

    if args.paper_size not in zoo.presets():
        raise ValueError(f"--paper-size: unknown preset {args.paper_size!r}; see `zoo presets`.")
    keras.utils.set_random_seed(0)
    model = with_stand_in_vocabulary(zoo.load(args.paper_size))
    parameters, measured = model.count_params(), side_by_side(model, args.paper_size, args)
    sizes = {"whole": measured["export"], "variables": measured["variables"], "graph": measured["graph"]}
    speeds = measured["served"]
    rows = [[part, f"{f / 2**20:,.1f} MiB", f"{q / 2**20:,.1f} MiB", f"{q / f:.1%}"] for part, (f, q) in sizes.items()]
    rows += [[f"`{name}` p50", f"{f * 1e3:,.1f} ms", f"{q * 1e3:,.1f} ms", f"{q / f:.2f}×"]
             for name, (f, q) in speeds.items()]
    rendered = harness.markdown_table(["", "float32:", "int8:", "int8 / float32:"], rows)
    print(f"{args.paper_size} ({parameters:,} parameters, random weights), {harness.cpu_model()}, load average "
          f"{harness.load_average_text()}, p50 of {args.calls} alternating calls per model:")
    return harness.report(args, {"cpu": harness.cpu_model(), "preset": args.paper_size, "parameters": parameters,
                                 "calls": args.calls, "new_tokens": args.new_tokens, "bytes": sizes,
                                 "served": speeds, "table": rendered}, rendered)


def kernels_report(args):
    """`--kernels D,N`: one product of each kernel."""
    try:
        d, n = (int(v) for v in args.kernels.split(","))
        assert d >= 1 and n >= 1
    except (ValueError, AssertionError):
        raise ValueError(f"--kernels must be two positive sizes D,N (e.g. 128,10002), got {args.kernels!r}.") from None
    times, flags = kernels(d, n), harness.cpu_flags(harness.ISA[1:])  # the int8 and bfloat16 instructions
    rendered = kernel_table(times)
    print(f"{harness.cpu_model()} (int8/bfloat16 instructions: {flags}), load average "
          f"{harness.load_average_text()}; [1, {d}] x [{d}, {n}], median of 11 loops of 200 products:")
    return harness.report(args, {"cpu": harness.cpu_model(), "cpu_flags": flags, "shape": [d, n], "seconds": times,
                                 "table": rendered}, rendered)


def main(argv=None):
    p = harness.parser("int8", __doc__)
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS),
                   help=f"comma-separated presets with trained weights (default {','.join(DEFAULT_PRESETS)})")
    p.add_argument("--english", default="corpora/en", help="the English corpus directory, for gcnn-en's test set "
                                                           "(default corpora/en)")
    p.add_argument("--calls", type=int, default=50, help="timed calls of each request, per model (default 50)")
    p.add_argument("--new-tokens", type=int, default=20, help="tokens a generate call writes (default 20)")
    p.add_argument("--kernels", metavar="D,N", help="instead: time one [1, D] x [D, N] product with each kernel "
                   "TensorFlow ships for float32, bfloat16 and int8 weights (e.g. 128,10002)")
    p.add_argument("--paper-size", metavar="PRESET", help="instead: a preset of the paper's size with random "
                   "weights and a stand-in vocabulary (e.g. gcnn-14): export sizes and served p50s, no perplexity")
    args = p.parse_args(argv)
    if args.kernels is not None and args.paper_size is None:
        return kernels_report(args)
    harness.at_least_one(args, "calls", "new_tokens")
    if args.paper_size is not None:
        return paper_size(args)
    import zoo
    from zoo.weights import trained_presets

    presets = preset_list(args.presets)
    unknown = [name for name in presets if name not in trained_presets()]
    if unknown:
        raise ValueError(f"{unknown[0]!r} has no trained weights to quantize; presets with them: "
                         f"{', '.join(sorted(trained_presets()))}.")
    rows = []
    for preset in presets:
        lines = test_lines(preset, args.english)
        rows.append(r := {"preset": preset, **side_by_side(zoo.load(preset, weights="trained"), preset, args, lines)})
        print(f"  {preset}: perplexity {r['ppl'][0]:.2f} → {r['ppl'][1]:.2f}, export "
              f"{r['export'][1] / r['export'][0]:.1%}", flush=True)
    rendered = table(rows)
    print(f"{harness.cpu_model()}, load average {harness.load_average_text()}, p50 of {args.calls} alternating calls "
          "per model:")
    return harness.report(args, {"cpu": harness.cpu_model(), "calls": args.calls, "new_tokens": args.new_tokens,
                                 "table": rendered, "rows": rows}, rendered)
