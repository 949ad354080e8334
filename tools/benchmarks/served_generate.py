"""`zoo benchmark served-generate`: the exported `generate` at batch 1, as the model server runs it
with its default flags, against the exports of an earlier version of the zoo, side by side.

How it measures: docs/benchmarks.md#served-generate.
"""

import json
import os
import statistics
import tempfile

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import with_stand_in_vocabulary
from zoo.tools.benchmarks.serving_threads import measure

FLOOR, SIDES = "the step alone", ("baseline", "this version")
FLOOR_PROMPT = (1, 5, 6, 7, 8, 9)  # <s> and five ids: the length of the benchmark's prompt


def seeded(presets, seed, export):
    """`{preset: export(preset, the preset with random weights drawn after set_random_seed(seed))}`."""
    import keras

    import zoo

    out = {}
    for preset in presets:
        keras.utils.set_random_seed(seed)
        out[preset] = export(preset, zoo.load(preset))
    return out


def exports_of(base, presets, seed, head_blocks=None):
    """`{preset: this version's export under `base`}` (`export_saved_model`'s `head_blocks`)."""
    from zoo.export import export_saved_model

    # a preset of the paper's size has no vocabulary here: a stand-in of its size
    return seeded(presets, seed, lambda preset, model: export_saved_model(
        with_stand_in_vocabulary(model), base, preset, head_blocks=head_blocks))


def floor_exports(base, presets, seed, blocks):
    """`{preset: path}`: `floor_export` of each preset with the same random weights as `exports_of`'s."""
    return seeded(presets, seed, lambda preset, model: floor_export(model, os.path.join(base, "floor", preset),
                                                                    blocks[preset]))


def floor_export(model, path, head_blocks):
    """A SavedModel whose `generate(text, max_new_tokens)` runs only, after `FLOOR_PROMPT`, `max_new_tokens`
    steps of `model.step`, its output layer (in `head_blocks` blocks) and an argmax (docs/benchmarks.md
    #served-generate); outputs `lengths` and `completion` (the last id, as text)."""
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
    versions = sorted((int(v) for v in os.listdir(folder) if v.isdigit()), reverse=True) \
        if os.path.isdir(folder) else []
    for path in (os.path.join(folder, str(v)) for v in versions):
        if os.path.exists(os.path.join(path, "saved_model.pb")):
            return path
    raise ValueError(f"--baseline {directory!r} holds no export of {preset} ({folder}/<version>/saved_model.pb); "
                     "make it with the earlier version's code (docs/benchmarks.md#served-generate).")


def rates(sides):
    """`{side: median new tokens/s of its runs}`."""
    return {side: harness.median_rate(runs, "new_tokens", "generate_s") for side, runs in sides.items()}


def table(results):
    """Markdown rows from `{preset: {"baseline": [runs], "this version": [runs]}}`."""
    def cells(x):
        return [f"{x['baseline']:,.0f}", f"{x['this version']:,.0f}", f"{x['this version'] / x['baseline']:.2f}×"]

    rows = [[f"`{preset}`", *cells(rates(sides)),
             *cells({s: 64 / statistics.median(r["serving_default_s"] for r in sides[s]) for s in SIDES})]
            for preset, sides in results.items()]
    return harness.markdown_table(["preset", "`generate` batch 1, new tokens/s: baseline:", "this version:",
                                   "× baseline:", "`serving_default` 64 lines, lines/s: baseline:", "this version:",
                                   "× baseline:"], rows)


def floor_table(results):
    """Markdown rows of `--floor`: each side's new tokens/s (µs per new token), the step alone as a
    multiple of the baseline and this version's share of it."""
    rows = []
    for preset, sides in results.items():
        speed = rates(sides)
        rows.append([f"`{preset}`", *(f"{speed[s]:,.0f} ({1e6 / speed[s]:.0f})" for s in (*SIDES, FLOOR)),
                     f"{speed[FLOOR] / speed['baseline']:.2f}×", f"{speed['this version'] / speed[FLOOR]:.0%}"])
    return harness.markdown_table(["preset", "baseline: new tokens/s (µs each):", "this version:", "the step alone "
                                   "(`step`, output layer, argmax):", "the step alone × baseline:",
                                   "this version / the step alone:"], rows)


def main(argv=None):
    p = harness.parser("served-generate", __doc__, 5, "fresh processes of each side per preset (default 5)")
    p.add_argument("--baseline", help="a directory of the earlier version's exports, <preset>/<version>")
    p.add_argument("--write-exports", metavar="DIR", help="only write this version's exports into DIR and stop")
    p.add_argument("--presets", default="gcnn-ptb,lstmp-ptb", help="comma-separated presets (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the random weights' seed, on both sides (default 0)")
    p.add_argument("--calls", type=int, default=9, help="timed requests of each kind per process (default 9)")
    p.add_argument("--new-tokens", type=int, default=100, help="new tokens per generate request (default 100)")
    p.add_argument("--top-k", type=int, default=40, help="generate's top_k, at temperature 0.8 (default 40)")
    p.add_argument("--head-blocks", type=int, metavar="N", help="this version's exports with zoo export "
                   "--head-blocks N (default: zoo export's)")
    p.add_argument("--floor", action="store_true", help="also time the model's step, output layer and argmax alone")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats", "calls", "new_tokens", "head_blocks")
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
    baselines = {preset: baseline_export(args.baseline, preset) for preset in presets}
    start_load, results = harness.load_average_text(), {}
    with tempfile.TemporaryDirectory(prefix="zoo-served-") as base:
        current = exports_of(base, presets, args.seed, args.head_blocks)
        blocks = {}
        for preset, path in current.items():
            with open(os.path.join(path, "assets.extra", "zoo_export.json")) as f:
                blocks[preset] = json.load(f)["head_blocks"]
        floors = floor_exports(base, presets, args.seed, blocks) if args.floor else {}
        for preset in presets:
            exports = {"baseline": baselines[preset], "this version": current[preset], FLOOR: floors.get(preset)}
            results[preset] = harness.interleaved(
                {side: (lambda e=export: measure(e, 0, 0, args.calls, args.new_tokens, args.top_k))
                 for side, export in exports.items() if export}, args.repeats)
            print(f"  {preset}: " + ", ".join(f"{side} {r:,.0f} tok/s" for side, r in rates(results[preset]).items()),
                  flush=True)
    from zoo.models.generation import l2_cache_bytes

    same = {preset: len({r["completion"] for side in SIDES for r in sides[side]}) == 1
            for preset, sides in results.items()}
    rendered = table(results) + ("\n\n" + floor_table(results) if args.floor else "")
    print(f"{harness.cpu_model()}, load average {start_load} at the start, {harness.load_average_text()} at the end; "
          f"medians of {args.repeats} fresh processes per side, {args.calls} requests each; both sides wrote the same "
          "text: " + ", ".join(f"{preset} {'yes' if ok else 'NO'}" for preset, ok in same.items())
          + "; this version's output layer in "
          + ", ".join(f"{n} block{'s' * (n > 1)} ({preset})" for preset, n in blocks.items())
          + f", level-2 cache {l2_cache_bytes()} bytes per core")
    harness.report(args, {"presets": presets, "baseline": baselines, "seed": args.seed, "cpu": harness.cpu_model(),
                          "repeats": args.repeats, "calls": args.calls, "new_tokens": args.new_tokens,
                          "top_k": args.top_k, "head_blocks": blocks, "l2_cache_bytes": l2_cache_bytes(),
                          "same_text": same, "results": results, "table": rendered}, rendered)
