"""`zoo benchmark moe-ptb`: Appendix A's Table 6 and Table 7's trend on the Penn Treebank.

How it measures: docs/benchmarks.md#moe-ptb.
"""

import sys

from zoo.tools.benchmarks import harness


def main(argv):
    p = harness.parser("moe-ptb", __doc__)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"command: {harness.command('moe-ptb', argv)}", flush=True)

    from zoo.registry import get_preset
    from zoo.tools.benchmarks.side_by_side import on_ptb

    preset, stats = get_preset("lstm-moe-ptb"), ("cv_importance", "cv_load", "max_load_ratio")
    unbalanced = [dict(spec, **({"importance_weight": 0.0, "load_weight": 0.0} if spec["type"] == "moe" else {}))
                  for spec in preset.config["layers"]]
    variants = {"lstm-moe-ptb, losses 0.1/0.1": ("lstm-moe-ptb", {}),
                "lstm-moe-ptb, losses 0/0": ("lstm-moe-ptb", {"layers": unbalanced}),
                "lstm-wide-ptb (dense)": ("lstm-wide-ptb", {})}
    batch, seq_len = preset.train["batch_size"], preset.train["seq_len"]
    run = on_ptb(variants, args.seed, batch, seq_len, args.steps, track=stats)
    print(f"\n{args.steps} steps of {batch}x{seq_len} tokens, seed {args.seed}; "
          "MoE statistics averaged over the last 100 training batches")
    results = {label: {"params": r["params"], "median_step_s": r["median_step_s"],
                       **{s: next((v for k, v in r["metrics"].items() if k.endswith(s)), None) for s in stats},
                       "valid_perplexity_stream": r["valid_perplexity_stream"]} for label, r in run.items()}
    fmt = harness.fmt
    harness.report(args, {"argv": argv, "results": results}, harness.text_table(
        [("model", -32), ("params", 11), ("s/step", 7), ("CV(Imp)", 8), ("CV(Load)", 9), ("max/mean", 9),
         ("valid ppl", 10)],
        [[label, f"{r['params']:,d}", f"{r['median_step_s']:.3f}", *(fmt(r[s], ".3f") for s in stats),
          f"{r['valid_perplexity_stream']:.2f}"] for label, r in results.items()]))
    return results

if __name__ == "__main__":
    main(sys.argv[1:])
