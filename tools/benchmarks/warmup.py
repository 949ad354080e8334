"""`zoo benchmark warmup`: the latency of the first `serving_default` and `generate` requests
after a fresh load of an export, without and with its warmup records
(`assets.extra/tf_serving_warmup_requests`) replayed first, as TF Serving replays them.

Each measurement is a fresh Python process that imports only TensorFlow (and, to replay the
records, tensorflow-serving-api's protos, as a model server has them): it loads the SavedModel,
replays the records or not, then times one `serving_default` request (8 sentences) and one
`generate` request (one prompt, 20 greedy tokens). Cold and warm processes alternate; the table
gives the median of `--repeats` of each, and the ratio cold / warm.
"""

import argparse
import os
import statistics
import tempfile

from zoo.tools.benchmarks.common import at_least_one, child_json, cpu_model, write_results

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import tensorflow as tf
export, replay = sys.argv[1], sys.argv[2] == "1"
loaded = tf.saved_model.load(export)
t1 = time.perf_counter()
if replay:
    from tensorflow_serving.apis import prediction_log_pb2
    for record in tf.data.TFRecordDataset(export + "/assets.extra/tf_serving_warmup_requests"):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        loaded.signatures[request.model_spec.signature_name](
            **{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})
t2 = time.perf_counter()
text = tf.constant(["the company said it would buy the stock"] * 8)
start = time.perf_counter()
loaded.signatures["serving_default"](text=text)["perplexity"].numpy()
score = time.perf_counter() - start
start = time.perf_counter()
loaded.signatures["generate"](text=tf.constant(["the company said"]), max_new_tokens=tf.constant(20),
                              temperature=tf.constant(0.0), top_k=tf.constant(0), top_p=tf.constant(1.0),
                              seed=tf.constant(0), num_beams=tf.constant(1))["text"].numpy()
generate = time.perf_counter() - start
print(json.dumps({"load_s": t1 - t0, "replay_s": t2 - t1, "serving_default_s": score, "generate_s": generate}))
"""


def measure(export, replay):
    """One fresh process's timings (seconds)."""
    return child_json(CHILD, [export, "1" if replay else "0"], f"the {'warm' if replay else 'cold'} process",
                      timeout=900)


def table(cold, warm):
    """Markdown rows: the medians of each first request, cold and warm, and their ratio."""
    rows = ["| first request after a fresh load | without warmup (ms) | with warmup replayed (ms) | ratio |",
            "| --- | ---: | ---: | ---: |"]
    for key, label in (("serving_default_s", "`serving_default`, 8 sentences"),
                       ("generate_s", "`generate`, 1 prompt, 20 greedy tokens")):
        c = statistics.median(r[key] for r in cold) * 1e3
        w = statistics.median(r[key] for r in warm) * 1e3
        rows.append(f"| {label} | {c:,.1f} | {w:,.1f} | {c / w:.1f}× |")
    replay = statistics.median(r["replay_s"] for r in warm)
    rows.append(f"| (replaying the warmup records at load) | — | {replay * 1e3:,.0f} | |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(prog="zoo benchmark warmup", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="gcnn-ptb", help="a preset with trained weights, or a preset directory")
    p.add_argument("--repeats", type=int, default=5, help="fresh processes of each kind (default 5)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    at_least_one(args, "repeats")
    import zoo
    from zoo.export import export_saved_model

    model = zoo.load(args.preset, weights=None if os.path.isdir(args.preset) else "trained")
    with tempfile.TemporaryDirectory(prefix="zoo-warmup-") as base:
        export = export_saved_model(model, base, "model")
        cold, warm = [], []
        for i in range(args.repeats):
            cold.append(measure(export, False))
            warm.append(measure(export, True))
            print(f"  {i + 1}/{args.repeats}: cold {cold[-1]['generate_s'] * 1e3:.0f} ms, warm "
                  f"{warm[-1]['generate_s'] * 1e3:.0f} ms (first generate)", flush=True)
    rendered = table(cold, warm)
    print(f"{args.preset}, {cpu_model()}, median of {args.repeats} fresh processes each:\n{rendered}")
    write_results(args.json, {"preset": args.preset, "cpu": cpu_model(), "repeats": args.repeats,
                              "cold": cold, "warm": warm, "table": rendered})
