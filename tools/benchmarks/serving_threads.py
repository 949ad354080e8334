"""`zoo benchmark serving-threads`: an export served with the model server's default thread pools
against smaller ones, for batch-1 `generate` and a batched `serving_default`.

How it measures: docs/benchmarks.md#serving-threads.
"""

import statistics
import tempfile

from zoo.tools.benchmarks import harness

# (label, intra-op threads, inter-op threads): 0 is the server's default, one thread per core; an
# inter-op count below 0 runs every op in the thread of the request that needs it
SETTINGS = (("server defaults (0, 0)", 0, 0), ("intra 1, inter 1", 1, 1), ("intra 1, inter -1", 1, -1),
            ("intra 0, inter -1", 0, -1))

CHILD = r"""
import json, statistics, sys
import harness
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


def measure(export, intra, inter, calls, new_tokens, top_k=40):
    """One fresh process's medians (seconds) for one thread setting."""
    return harness.python_child(CHILD, [export, intra, inter, calls, new_tokens, top_k],
                                f"the process with intra {intra}, inter {inter}")


def table(results, new_tokens):
    """Markdown rows from `{label: [per-process results]}`, the first label being the baseline."""
    rows, base = [], None
    for name, runs in results.items():
        gen = new_tokens / statistics.median(r["generate_s"] for r in runs)
        score = 64 / statistics.median(r["serving_default_s"] for r in runs)
        base = base or (gen, score)
        rows.append([name, f"{gen:,.0f}", f"{gen / base[0]:.2f}×", f"{score:,.0f}", f"{score / base[1]:.2f}×"])
    return harness.markdown_table(["thread pools (intra, inter)", "`generate` batch 1, new tokens/s:", "× defaults:",
                                   "`serving_default` 64 lines, lines/s:", "× defaults:"], rows)


def main(argv=None):
    p = harness.parser("serving-threads", __doc__, 5, "fresh processes of each setting (default 5)")
    p.add_argument("--preset", default="gcnn-ptb", help="a preset (random weights) or a preset directory")
    p.add_argument("--calls", type=int, default=9, help="timed requests of each kind per process (default 9)")
    p.add_argument("--new-tokens", type=int, default=100, help="new tokens per generate request (default 100)")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats", "calls", "new_tokens")
    import zoo
    from zoo.export import export_saved_model

    model, start_load = zoo.load(args.preset), harness.load_average_text()
    with tempfile.TemporaryDirectory(prefix="zoo-threads-") as base:  # the server's defaults first: the table's base
        export = export_saved_model(model, base, "model", max_new_tokens=max(args.new_tokens, 1))
        results = harness.interleaved({name: (lambda s=s: measure(export, *s, args.calls, args.new_tokens))
                                       for name, *s in SETTINGS}, args.repeats)
    short = [(name, r["new_tokens"]) for name, runs in results.items() for r in runs
             if r["new_tokens"] != args.new_tokens]
    if short:
        raise RuntimeError(f"{short[0][0]}: generate wrote {short[0][1]} tokens, not {args.new_tokens}.")
    same = len({r["completion"] for runs in results.values() for r in runs}) == 1
    rendered = table(results, args.new_tokens)
    print(f"{args.preset}, {harness.cpu_model()}, load average {start_load} at the start, "
          f"{harness.load_average_text()} at the end; medians of {args.repeats} fresh processes per setting, "
          f"{args.calls} requests each; every setting wrote the same text: {'yes' if same else 'NO'}")
    harness.report(args, {"preset": args.preset, "cpu": harness.cpu_model(), "repeats": args.repeats,
                          "calls": args.calls, "new_tokens": args.new_tokens, "same_text": same,
                          "results": results, "table": rendered}, rendered)
