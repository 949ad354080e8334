"""`zoo benchmark warmup`: the latency of the first `serving_default` and `generate` requests
after a fresh load of an export, without and with its warmup records
(`assets.extra/tf_serving_warmup_requests`) replayed first, as TF Serving replays them.

How it measures: docs/benchmarks.md#warmup.
"""

import os
import statistics
import tempfile

from zoo.tools.benchmarks import harness

CHILD = r"""
import harness
load_s, tf = harness.timed(__import__, "tensorflow")
seconds, loaded = harness.timed(tf.saved_model.load, sys.argv[1])

def replay():
    from tensorflow_serving.apis import prediction_log_pb2
    for record in tf.data.TFRecordDataset(sys.argv[1] + "/assets.extra/tf_serving_warmup_requests"):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        loaded.signatures[request.model_spec.signature_name](
            **{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})

replay_s = harness.timed(replay)[0] if sys.argv[2] == "1" else 0.0
text = tf.constant(["the company said it would buy the stock"] * 8)
score = harness.timed(lambda: loaded.signatures["serving_default"](text=text)["perplexity"].numpy())[0]
generate = harness.timed(lambda: harness.generate_request(loaded, ["the company said"], 20)["text"].numpy())[0]
harness.answer(lambda: {"load_s": load_s + seconds, "replay_s": replay_s, "serving_default_s": score,
                        "generate_s": generate})
"""


def measure(export, replay):
    """One fresh process's timings (seconds)."""
    return harness.python_child(CHILD, [export, "1" if replay else "0"],
                                f"the {'warm' if replay else 'cold'} process", timeout=900)


def table(cold, warm):
    """Markdown rows: the medians of each first request, cold and warm, and their ratio."""
    ms = {(side, key): statistics.median(r[key] for r in runs) * 1e3 for side, runs in (("cold", cold), ("warm", warm))
          for key in runs[0]}
    rows = [[label, f"{ms['cold', key]:,.1f}", f"{ms['warm', key]:,.1f}", f"{ms['cold', key] / ms['warm', key]:.1f}×"]
            for key, label in (("serving_default_s", "`serving_default`, 8 sentences"),
                               ("generate_s", "`generate`, 1 prompt, 20 greedy tokens"))]
    rows.append(["(replaying the warmup records at load)", "—", f"{ms['warm', 'replay_s']:,.0f}", ""])
    return harness.markdown_table(["first request after a fresh load", "without warmup (ms):",
                                   "with warmup replayed (ms):", "ratio:"], rows)


def main(argv=None):
    p = harness.parser("warmup", __doc__, 5, "fresh processes of each kind (default 5)")
    p.add_argument("--preset", default="gcnn-ptb", help="a preset with trained weights, or a preset directory")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats")
    import zoo
    from zoo.export import export_saved_model

    model = zoo.load(args.preset, weights=None if os.path.isdir(args.preset) else "trained")
    with tempfile.TemporaryDirectory(prefix="zoo-warmup-") as base:
        export = export_saved_model(model, base, "model")
        runs = harness.interleaved({"cold": lambda: measure(export, False), "warm": lambda: measure(export, True)},
                                   args.repeats)
    rendered = table(runs["cold"], runs["warm"])
    print(f"{args.preset}, {harness.cpu_model()}, median of {args.repeats} fresh processes each:")
    harness.report(args, {"preset": args.preset, "cpu": harness.cpu_model(), "repeats": args.repeats, **runs,
                          "table": rendered}, rendered)
