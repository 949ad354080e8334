"""The Penn Treebank side-by-side runs: several models from one seed trained on the same batches,
their steps interleaved, then scored on the validation split. `zoo benchmark ptb-softmax`
(`ptb_softmax`) and `moe-ptb` (`moe_ptb`): docs/benchmarks.md#ptb-softmax, #moe-ptb.
"""

import statistics

from zoo.tools.benchmarks import harness


def train_side_by_side(models, batches, steps, report_every=100, track=()):
    """One `train_on_batch` per model per batch, in `harness.rotated` order: `{name: {"median_step_s"
    (the first 5 steps left out), "metrics": {each logged metric named in `track`: its mean over the
    last 100 steps}}}`."""
    times, recent = {name: [] for name in models}, {name: [] for name in models}
    for step, (x, y, w) in enumerate(batches.take(steps)):
        for name in harness.rotated(models, step):
            seconds, logs = harness.timed(models[name].train_on_batch, x, y, sample_weight=w, return_dict=True)
            times[name].append(seconds)
            recent[name] = (recent[name] + [logs])[-100:]  # train_on_batch's logs are this batch's own
        if report_every and (step + 1) % report_every == 0:
            print(f"  step {step + 1}/{steps}", flush=True)
    return {name: {"median_step_s": statistics.median(times[name][5:] or times[name]),
                   "metrics": {key: statistics.mean(float(logs[key]) for logs in recent[name])
                               for key in (recent[name][0] if recent[name] else []) if any(t in key for t in track)}}
            for name in models}


def on_ptb(variants, seed, batch_size, seq_len, steps, track=()):
    """Every variant (`{label: (preset, overrides)}`) made from `seed` and compiled, trained side by
    side on the same shuffled batches of the training split, then scored on the validation split
    (stream): `{label: {"params", "median_step_s", each of `track` (the logged metric ending so, or
    None), "valid_perplexity_stream"}}`."""
    import keras

    import zoo
    from zoo.data import pipeline, ptb_tokenizer, read_lines

    models = {}
    for label, (preset, overrides) in variants.items():
        keras.utils.set_random_seed(seed)
        models[label] = zoo.load(preset, **overrides)
        models[label].compile()
    batches = pipeline.stream_dataset(read_lines("ptb", "train"), ptb_tokenizer(), batch_size, seq_len, shuffle=True,
                                      seed=seed, repeat=True)
    trained = train_side_by_side(models, batches, steps, track=track)
    valid = read_lines("ptb", "valid")
    return {label: {"params": model.count_params(), "median_step_s": trained[label]["median_step_s"],
                    **{t: next((v for k, v in trained[label]["metrics"].items() if k.endswith(t)), None)
                       for t in track},
                    "valid_perplexity_stream": model.perplexity(valid, mode="stream")}
            for label, model in models.items()}


def ptb_softmax(argv):
    """`zoo benchmark ptb-softmax`: gcnn-ptb with the full softmax against the adaptive softmax."""
    p = harness.parser("ptb-softmax", ptb_softmax.__doc__)
    for flag, default in (("--steps", 500), ("--batch-size", 32), ("--seq-len", 64), ("--seed", 0)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--cutoffs", default="2000,6000", help="adaptive-softmax cutoffs, comma-separated")
    args = p.parse_args(argv)
    cutoffs = [int(c) for c in args.cutoffs.split(",")]
    print(f"command: {harness.command('ptb-softmax', argv)}", flush=True)
    results = on_ptb({"full": ("gcnn-ptb", {}), "adaptive": ("gcnn-ptb", {"cutoffs": cutoffs})}, args.seed,
                     args.batch_size, args.seq_len, args.steps)
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


def moe_ptb(argv):
    """`zoo benchmark moe-ptb`: Appendix A's Table 6 and Table 7's trend on the Penn Treebank."""
    p = harness.parser("moe-ptb", moe_ptb.__doc__)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"command: {harness.command('moe-ptb', argv)}", flush=True)
    from zoo.registry import get_preset

    preset, stats = get_preset("lstm-moe-ptb"), ("cv_importance", "cv_load", "max_load_ratio")
    unbalanced = [dict(spec, **({"importance_weight": 0.0, "load_weight": 0.0} if spec["type"] == "moe" else {}))
                  for spec in preset.config["layers"]]
    variants = {"lstm-moe-ptb, losses 0.1/0.1": ("lstm-moe-ptb", {}),
                "lstm-moe-ptb, losses 0/0": ("lstm-moe-ptb", {"layers": unbalanced}),
                "lstm-wide-ptb (dense)": ("lstm-wide-ptb", {})}
    batch, seq_len = preset.train["batch_size"], preset.train["seq_len"]
    results = on_ptb(variants, args.seed, batch, seq_len, args.steps, track=stats)
    print(f"\n{args.steps} steps of {batch}x{seq_len} tokens, seed {args.seed}; "
          "MoE statistics averaged over the last 100 training batches")
    harness.report(args, {"argv": argv, "results": results}, harness.text_table(
        [("model", -32), ("params", 11), ("s/step", 7), ("CV(Imp)", 8), ("CV(Load)", 9), ("max/mean", 9),
         ("valid ppl", 10)],
        [[label, f"{r['params']:,d}", f"{r['median_step_s']:.3f}", *(harness.fmt(r[s], ".3f") for s in stats),
          f"{r['valid_perplexity_stream']:.2f}"] for label, r in results.items()]))
    return results
