"""The output layer's blocks across level-2 cache sizes: what an export's default costs.

What runs and what the tables mean: results/benchmarks/head-blocks.md.
"""

from zoo.tools.benchmarks import harness

SIMULATED_MIB = (0.5, 1, 2, 32)
COUNTS = (1, 2, 3, 6, 11, 16)
VOCABULARY = 10002  # the Penn Treebank presets'


def forced_blocks(model, sizes=SIMULATED_MIB):
    """`{size in MiB: the blocks head_blocks chooses for a level-2 cache of that size, "export": the export's}`."""
    from zoo.models import generation

    out = {size: generation.head_blocks(model, cache_bytes=int(size * (1 << 20))) for size in sizes}
    return {**out, "export": generation.export_head_blocks(model)}


def loop(model, blocks, new_tokens):
    """A function running one batch-1 served `generate` loop (`TopK(40, 0.8)`), the output layer in `blocks` blocks."""
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
    """`{name: median over the rounds of its time / the round's fastest}` (one untimed warm-up each)."""
    runs = {name: run["times_s"] for name, run in harness.measure(calls, repeats).items()}
    fastest = [min(times[r] for times in runs.values()) for r in range(repeats)]
    return {name: harness.paired_ratio(times, fastest) for name, times in runs.items()}


def model_of(vocabulary):
    import keras

    import zoo

    keras.utils.set_random_seed(0)
    return zoo.load("gcnn-ptb", weights="random", vocabulary_size=vocabulary)


def run(repeats, new_tokens):
    """The two tables' figures: `{"forced": {...}, "emulated": {...}, "l2_cache_bytes": this machine's}`."""
    from zoo.models import generation

    cache, model = generation.l2_cache_bytes(), model_of(VOCABULARY)
    chosen = forced_blocks(model)
    ratios = side_by_side({b: loop(model, b, new_tokens) for b in sorted(set(chosen.values()))}, repeats)
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
    emulated = report["emulated"].values()
    worst = ["worst of the sizes", "", *(f"{max(r['x_fastest'][b] for r in emulated):.2f}" for b in COUNTS), "", "", ""]
    return "\n\n".join([
        f"This machine's level-2 cache per core: {report['l2_cache_bytes']} bytes; the export's default: "
        f"{report['export_blocks']} blocks.",
        harness.markdown_table(["simulated L2", "blocks chosen", "× fastest here"],
                               [[size, r["blocks"], f"{r['x_fastest']:.2f}"] for size, r in report["forced"].items()]),
        harness.markdown_table(
            ["emulated L2 (MiB)", "vocabulary", *(f"{b} blocks" for b in COUNTS), "best", "export default / best",
             "rule / best"],
            [[size, r["vocabulary"], *(f"{r['x_fastest'][b]:.2f}" for b in COUNTS), r["best"],
              f"{r['export_default_vs_best']:.2f}", f"{r['rule_vs_best']:.2f}"]
             for size, r in report["emulated"].items()] + [worst])])


def main(argv=None):
    p = harness.parser("head-blocks", __doc__, 11)
    p.prog = "python -m zoo.tools.benchmarks.head_blocks"
    p.add_argument("--new-tokens", type=int, default=64, help="new tokens per loop (default 64)")
    p.add_argument("--out", dest="json", metavar="PATH", help="the same as --json")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats", "new_tokens")
    report = run(args.repeats, args.new_tokens)
    return harness.report(args, report, table(report))


if __name__ == "__main__":
    main()
