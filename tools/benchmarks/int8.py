"""`zoo benchmark int8`: each preset in float32 and in int8 (`lm.quantize("int8")`), side by side.

For each preset, with its shipped trained weights:

* per-word perplexity on its own test set (the treebank's test split; for `gcnn-en`, the test
  documents of `--english DIR`, the corpus `python -m zoo.tools.corpora english DIR` builds),
  float32 and int8, and the relative change;
* the export's size on disk (`zoo export`'s defaults, with and without `--quantize int8`), whole
  and its variables alone (the graph, tokenizer and warmup records do not shrink);
* served speed: one fresh process that imports only TensorFlow loads both exports and calls them
  in alternation, `--calls` times each: `serving_default` on one 20-word sentence and on 32 of
  them, and `generate` at batch 1 (a 3-word prompt, `--new-tokens` greedy tokens). p50s, and the
  ratio int8 / float32 (below 1: int8 is faster).
"""

import argparse
import os
import statistics
import tempfile

from zoo.tools.benchmarks.common import child_json, cpu_model, load_average_text, write_results

DEFAULT_PRESETS = ("gcnn-ptb", "gcnn-ptb-deep", "lstmp-ptb", "gcnn-en")
SENTENCE = "the company said it would buy the stock of the bank for about one billion dollars in cash next year"

CHILD = r"""
import json, sys, time
import tensorflow as tf
try:
    import tensorflow_text  # noqa: F401  (a subword export's tokenizer ops)
except ImportError:
    pass
paths, calls, new_tokens, sentence = sys.argv[1:3], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
models = [tf.saved_model.load(p) for p in paths]
requests = {
    "serving_default_1": lambda m: m.signatures["serving_default"](text=tf.constant([sentence])),
    "serving_default_32": lambda m: m.signatures["serving_default"](text=tf.constant([sentence] * 32)),
    "generate_1": lambda m: m.signatures["generate"](
        text=tf.constant(["the company said"]), max_new_tokens=tf.constant(new_tokens), temperature=tf.constant(0.0),
        top_k=tf.constant(0), top_p=tf.constant(1.0), seed=tf.constant(0), num_beams=tf.constant(1)),
}
times = {name: [[], []] for name in requests}
for name, request in requests.items():
    for m in models:  # traced and warm before timing
        request(m); request(m)
    for i in range(calls):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for j in order:
            start = time.perf_counter()
            request(models[j])
            times[name][j].append(time.perf_counter() - start)
print(json.dumps(times))
"""


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def test_lines(preset, english):
    from zoo.data.corpus import read_lines

    if preset == "gcnn-en":
        if not os.path.isfile(os.path.join(english, "test.txt")):
            raise ValueError(f"gcnn-en's test set is the test split of the English corpus, and {english!r} has no "
                             "test.txt; build it with `python -m zoo.tools.corpora english DIR` and give --english DIR.")
        return read_lines(english, "test")
    return read_lines("ptb", "test")


def served(exports, calls, new_tokens):
    """p50 seconds per request kind, `[float32, int8]`, from one fresh TensorFlow-only process."""
    times = child_json(CHILD, [*exports, calls, new_tokens, SENTENCE], f"the process serving {exports}")
    return {name: [statistics.median(t) for t in pair] for name, pair in times.items()}


def table(rows):
    mib = 2 ** 20
    out = ["| preset | test per-word perplexity, float32 → int8 | change | export (MiB), float32 → int8 | "
           "export ratio | variables ratio | `serving_default` ×1 p50 (ms) | ×32 p50 (ms) | `generate` batch 1 "
           "p50 (ms) |",
           "| --- | --- | ---: | --- | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        speed = []
        for name in ("serving_default_1", "serving_default_32", "generate_1"):
            f, q = r["served"][name]
            speed.append(f"{f * 1e3:,.1f} → {q * 1e3:,.1f} ({q / f:.2f}×)")
        out.append(f"| `{r['preset']}` | {r['ppl'][0]:,.2f} → {r['ppl'][1]:,.2f} | {r['ppl'][1] / r['ppl'][0] - 1:+.2%} | "
                   f"{r['export'][0] / mib:,.1f} → {r['export'][1] / mib:,.1f} | {r['export'][1] / r['export'][0]:.1%} | "
                   f"{r['variables'][1] / r['variables'][0]:.1%} | " + " | ".join(speed) + " |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="zoo benchmark int8", description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS),
                   help=f"comma-separated presets with trained weights (default {','.join(DEFAULT_PRESETS)})")
    p.add_argument("--english", default="corpora/en", help="the English corpus directory, for gcnn-en's test set "
                                                           "(default corpora/en)")
    p.add_argument("--calls", type=int, default=50, help="timed calls of each request, per model (default 50)")
    p.add_argument("--new-tokens", type=int, default=20, help="tokens a generate call writes (default 20)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    for name in ("calls", "new_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    presets = [name for name in args.presets.split(",") if name]
    if not presets:
        raise ValueError("--presets names no preset; give at least one, e.g. --presets gcnn-ptb.")
    import zoo
    from zoo.export import export_saved_model
    from zoo.weights import trained_presets

    unknown = [name for name in presets if name not in trained_presets()]
    if unknown:
        raise ValueError(f"{unknown[0]!r} has no trained weights to quantize; presets with them: "
                         f"{', '.join(sorted(trained_presets()))}.")
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-int8-") as base:
        for preset in presets:
            lines = test_lines(preset, args.english)
            ppl, exports = [], []
            model = zoo.load(preset, weights="trained")
            for kind in ("float32", "int8"):
                if kind == "int8":
                    model.quantize("int8")
                ppl.append(float(model.perplexity(lines, per="word")))
                exports.append(export_saved_model(model, base, f"{preset}-{kind}"))
            row = {"preset": preset, "ppl": ppl, "export": [directory_bytes(e) for e in exports],
                   "variables": [directory_bytes(os.path.join(e, "variables")) for e in exports],
                   "served": served(exports, args.calls, args.new_tokens)}
            rows.append(row)
            print(f"  {preset}: perplexity {ppl[0]:.2f} → {ppl[1]:.2f}, export "
                  f"{row['export'][1] / row['export'][0]:.1%}", flush=True)
    rendered = table(rows)
    print(f"{cpu_model()}, load average {load_average_text()}, p50 of {args.calls} alternating calls per model:\n"
          f"{rendered}")
    write_results(args.json, {"cpu": cpu_model(), "calls": args.calls, "new_tokens": args.new_tokens,
                              "table": rendered, "rows": rows})
