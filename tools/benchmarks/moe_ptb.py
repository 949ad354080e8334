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

    def without_balancing():
        layers = [dict(s) for s in get_preset("lstm-moe-ptb").config["layers"]]
        for spec in layers:
            if spec["type"] == "moe":
                spec.update(importance_weight=0.0, load_weight=0.0)
        return {"layers": layers}

    variants = {
        "lstm-moe-ptb, losses 0.1/0.1": ("lstm-moe-ptb", {}),
        "lstm-moe-ptb, losses 0/0": ("lstm-moe-ptb", without_balancing()),
        "lstm-wide-ptb (dense)": ("lstm-wide-ptb", {}),
    }
    train = get_preset("lstm-moe-ptb").train
    run = on_ptb(variants, args.seed, train["batch_size"], train["seq_len"], args.steps,
                 track=("cv_importance", "cv_load", "max_load_ratio"))
    print(f"\n{args.steps} steps of {train['batch_size']}x{train['seq_len']} tokens, seed {args.seed}; "
          "MoE statistics averaged over the last 100 training batches")
    results = {}
    for label, r in run.items():
        pick = lambda suffix: next((v for k, v in r["metrics"].items() if k.endswith(suffix)), None)  # noqa: E731
        results[label] = {"params": r["params"], "median_step_s": r["median_step_s"],
                          "cv_importance": pick("cv_importance"), "cv_load": pick("cv_load"),
                          "max_load_ratio": pick("max_load_ratio"),
                          "valid_perplexity_stream": r["valid_perplexity_stream"]}
    fmt = harness.fmt
    harness.report(args, {"argv": argv, "results": results}, harness.text_table(
        [("model", -32), ("params", 11), ("s/step", 7), ("CV(Imp)", 8), ("CV(Load)", 9), ("max/mean", 9),
         ("valid ppl", 10)],
        [[label, f"{r['params']:,d}", f"{r['median_step_s']:.3f}", fmt(r["cv_importance"], ".3f"),
          fmt(r["cv_load"], ".3f"), fmt(r["max_load_ratio"], ".3f"), f"{r['valid_perplexity_stream']:.2f}"]
         for label, r in results.items()]))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
