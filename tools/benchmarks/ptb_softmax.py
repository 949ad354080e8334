"""`zoo benchmark ptb-softmax`: gcnn-ptb with the full softmax against the adaptive softmax.

How it measures: docs/benchmarks.md#ptb-softmax.
"""

import sys

from zoo.tools.benchmarks import harness


def main(argv):
    p = harness.parser("ptb-softmax", __doc__)
    for flag, default in (("--steps", 500), ("--batch-size", 32), ("--seq-len", 64), ("--seed", 0)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--cutoffs", default="2000,6000", help="adaptive-softmax cutoffs, comma-separated")
    args = p.parse_args(argv)
    cutoffs = [int(c) for c in args.cutoffs.split(",")]
    print(f"command: {harness.command('ptb-softmax', argv)}", flush=True)

    from zoo.tools.benchmarks.side_by_side import on_ptb

    run = on_ptb({"full": ("gcnn-ptb", {}), "adaptive": ("gcnn-ptb", {"cutoffs": cutoffs})}, args.seed,
                 args.batch_size, args.seq_len, args.steps)
    results = {name: {key: r[key] for key in ("median_step_s", "valid_perplexity_stream", "params")}
               for name, r in run.items()}
    full, adaptive = results["full"], results["adaptive"]
    speedup = full["median_step_s"] / adaptive["median_step_s"]
    gap = adaptive["valid_perplexity_stream"] / full["valid_perplexity_stream"] - 1
    table = harness.text_table([("head", -10), ("params", 10), ("median s/step", 14), ("valid ppl (stream)", 19)],
                               [[name, f"{r['params']:,d}", f"{r['median_step_s']:.4f}",
                                 f"{r['valid_perplexity_stream']:.2f}"] for name, r in results.items()])
    harness.report(args, {"argv": argv, "cutoffs": cutoffs, "results": results, "speedup": speedup,
                          "perplexity_gap": gap},
                   f"gcnn-ptb, {args.steps} steps of {args.batch_size}x{args.seq_len} tokens, seed {args.seed}, "
                   f"adaptive cutoffs {cutoffs}\n{table}\nstep time full/adaptive: {speedup:.2f}x; adaptive "
                   f"perplexity vs full: {gap:+.1%}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
