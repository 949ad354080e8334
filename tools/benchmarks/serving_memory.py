"""`zoo benchmark serving-memory`: what one served model costs in memory, per preset.

How it measures: docs/benchmarks.md#serving-memory.
"""

import os
import statistics
import tempfile

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import preset_list

KEYS = ("preset", "parameters", "weights", "export_bytes", "runs")

CHILD = r"""
import contextlib, json, sys
import harness
import tensorflow as tf
with contextlib.suppress(ImportError):
    import tensorflow_text  # noqa: F401  (a subword export's tokenizer ops)
imported = harness.status_kib("VmRSS") * 1024
loaded = tf.saved_model.load(sys.argv[1])
after_load = harness.status_kib("VmRSS") * 1024
loaded.signatures["serving_default"](text=tf.constant(["the company said it would buy the stock"] * 32))
harness.generate_request(loaded, ["the company said"], 20)
print(json.dumps({"imported_rss": imported, "loaded_rss": after_load, "served_rss": harness.status_kib("VmRSS") * 1024,
                  "peak_rss": harness.status_kib("VmHWM") * 1024}))
"""


def measure(export):
    """One fresh process's resident memory (bytes) at each stage."""
    return harness.python_child(CHILD, [export], f"the process serving {export}")


def table(rows):
    """Markdown rows from `[(preset, parameters, weights, export bytes, [per-process results])]`."""
    out = []
    for preset, parameters, weights, size, runs in rows:
        mib = {key: statistics.median(r[key] for r in runs) / 2 ** 20 for key in runs[0]}
        out.append([f"`{preset}`", f"{parameters:,}", weights, f"{size / 2 ** 20:,.1f}",
                    *(f"{mib[key] - mib['imported_rss']:,.1f}" for key in ("loaded_rss", "served_rss")),
                    f"{mib['peak_rss']:,.1f}"])
    return harness.markdown_table(["preset", "parameters:", "weights", "export on disk (MiB):",
                                   "the model, once loaded (MiB):", "after its first requests (MiB):",
                                   "process peak (MiB):"], out)


def main(argv=None):
    p = harness.parser("serving-memory", __doc__, 3, "fresh processes per preset (default 3)")
    p.add_argument("--presets", default="gcnn-ptb,gcnn-ptb-deep,lstmp-ptb,gcnn-en",
                   help="comma-separated presets or preset directories (default %(default)s)")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats")
    presets = preset_list(args.presets)
    import zoo
    from zoo.export import export_saved_model
    from zoo.weights import trained_presets

    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-memory-") as base:
        for preset in presets:
            trained = not os.path.isdir(preset) and preset in trained_presets()
            model = zoo.load(preset, weights="trained" if trained else None)
            export = export_saved_model(model, base, preset.replace("/", "_"))
            runs = [measure(export) for _ in range(args.repeats)]
            rows.append((preset, model.count_params(), "trained" if trained else "random",
                         harness.directory_bytes(export), runs))
            print(f"  {preset}: {(runs[-1]['served_rss'] - runs[-1]['imported_rss']) / 2 ** 20:,.1f} MiB", flush=True)
    rendered = table(rows)
    print(f"{harness.cpu_model()}, medians of {args.repeats} fresh processes per preset (resident memory above a "
          "process that has imported TensorFlow):")
    harness.report(args, {"cpu": harness.cpu_model(), "repeats": args.repeats, "table": rendered,
                          "rows": [dict(zip(KEYS, r)) for r in rows]}, rendered)
