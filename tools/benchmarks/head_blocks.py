"""The output layer's blocks across level-2 cache sizes: what an export's default costs.

    python -m zoo.tools.benchmarks.head_blocks [--repeats 11] [--new-tokens 64] [--out FILE]

A batch-1 graph decoding loop (the exported `generate`'s: `TopK(40, 0.8)`, the sampler's own loop
laid out as an export lays it out, `generation.GROUPS` groups) of `gcnn-ptb` (random weights;
its output layer `[128, 10002]` float32, 5.1 MB) with the output layer in a forced number of
blocks (`FullSoftmax.blocks_computed_once`). Every loop's calls are interleaved, round after
round, and each is reported as the median over the rounds of its time over the round's fastest
loop's (the machine is shared: ratios only, side by side in one run).

- **forced**: on this machine, the blocks `generation.head_blocks` chooses for a level-2 cache of
  0.5, 1, 2 and 32 MiB (its `cache_bytes`), and the export's default
  (`generation.export_head_blocks`).
- **emulated**: a cache of S MiB on this machine's C is emulated by an output layer C/S times as
  large (vocabulary 10002 · C/S): what matters to a product is its matrix against the cache.
  For each S, every block count of `COUNTS`, the best of them, and the export's default count.
  At large S the emulated layer is small, so each block's fixed cost weighs more than it would
  at 5.1 MB: the default's cost there is an upper bound.
"""

import argparse
import json
import statistics
import sys
import time

SIMULATED_MIB = (0.5, 1, 2, 32)
COUNTS = (1, 2, 3, 6, 11, 16)
VOCABULARY = 10002  # the Penn Treebank presets'


def forced_blocks(model, sizes=SIMULATED_MIB):
    """`{size in MiB: the blocks generation.head_blocks chooses for a level-2 cache of that size}`
    and `{"export": the export's default}`."""
    from zoo.models import generation

    out = {size: generation.head_blocks(model, cache_bytes=int(size * (1 << 20))) for size in sizes}
    return {**out, "export": generation.export_head_blocks(model)}


def loop(model, blocks, new_tokens):
    """A function of no arguments: one batch-1 served-style `generate` loop with the output layer
    in `blocks` blocks, its ids read (`.numpy()`) so that the call has finished."""
    import tensorflow as tf

    from zoo.models import generation, samplers

    sampler, rules = samplers.TopK(40, 0.8), generation.rules(model)
    ids, lengths = tf.constant([[1] + list(range(4, 19))], tf.int32), tf.constant([16], tf.int32)

    @tf.function(autograph=False)
    def run():
        with generation.loop_invariants(model):
            return sampler(model, ids, lengths, new_tokens, tf.constant(0, tf.int64), rules, groups=generation.GROUPS,
                           head_blocks=blocks)[0]

    return lambda: run().numpy()


def side_by_side(calls, repeats):
    """`{name: median over the rounds of its time / the round's fastest}`, every call once per
    round (one untimed warm-up first), the order rotated each round."""
    for fn in calls.values():
        fn()
    names, rounds = list(calls), []
    for r in range(repeats):
        times = {}
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            calls[name]()
            times[name] = time.perf_counter() - start
        rounds.append(times)
    return {name: statistics.median(t[name] / min(t.values()) for t in rounds) for name in names}


def model_of(vocabulary):
    import keras

    import zoo

    keras.utils.set_random_seed(0)
    return zoo.load("gcnn-ptb", weights="random", vocabulary_size=vocabulary)


def run(repeats, new_tokens):
    """The two tables' figures: `{"forced": {...}, "emulated": {...}, "l2_cache_bytes": this machine's}`."""
    from zoo.models import generation

    cache = generation.l2_cache_bytes()
    model = model_of(VOCABULARY)
    chosen = forced_blocks(model)
    counts = sorted(set(chosen.values()))
    ratios = side_by_side({b: loop(model, b, new_tokens) for b in counts}, repeats)
    forced = {str(size): {"blocks": b, "x_fastest": ratios[b]} for size, b in chosen.items()}
    emulated = {}
    for size in SIMULATED_MIB:
        vocabulary = round(VOCABULARY * (cache or 1 << 20) / (size * (1 << 20)))
        model = model_of(vocabulary)
        ratios = side_by_side({b: loop(model, b, new_tokens) for b in COUNTS}, repeats)
        best = min(ratios, key=ratios.get)
        emulated[str(size)] = {"vocabulary": vocabulary, "x_fastest": ratios, "best": best,
                               "export_default_vs_best": ratios[chosen["export"]] / ratios[best],
                               "rule_vs_best": ratios[chosen[size]] / ratios[best]}
    return {"l2_cache_bytes": cache, "export_blocks": chosen["export"], "forced": forced, "emulated": emulated}


def table(report):
    """The report as markdown."""
    lines = [f"This machine's level-2 cache per core: {report['l2_cache_bytes']} bytes; the export's default: "
             f"{report['export_blocks']} blocks.", "", "| simulated L2 | blocks chosen | × fastest here |",
             "| --- | --- | --- |"]
    lines += [f"| {size} | {r['blocks']} | {r['x_fastest']:.2f} |" for size, r in report["forced"].items()]
    lines += ["", "| emulated L2 (MiB) | vocabulary | " + " | ".join(f"{b} blocks" for b in COUNTS)
              + " | best | export default / best | rule / best |", "| --- " * (len(COUNTS) + 5) + "|"]
    for size, r in report["emulated"].items():
        lines.append(f"| {size} | {r['vocabulary']} | " + " | ".join(f"{r['x_fastest'][b]:.2f}" for b in COUNTS)
                     + f" | {r['best']} | {r['export_default_vs_best']:.2f} | {r['rule_vs_best']:.2f} |")
    worst = {b: max(r["x_fastest"][b] for r in report["emulated"].values()) for b in COUNTS}
    lines.append("| worst of the sizes | | " + " | ".join(f"{worst[b]:.2f}" for b in COUNTS) + " | | | |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--out", help="also write the report as JSON here")
    args = p.parse_args(argv)
    report = run(args.repeats, args.new_tokens)
    sys.stdout.write(table(report) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
