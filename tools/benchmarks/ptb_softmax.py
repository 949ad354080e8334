"""`zoo benchmark ptb-softmax`: gcnn-ptb with the full softmax against the adaptive softmax.

Both models start from the same seed and train on the same batches, their steps interleaved
(full, adaptive, full, …) so that machine noise hits both alike; then both are scored on the
Penn Treebank validation split with the stream protocol.
"""

import argparse
import shlex
import sys


def main(argv):
    p = argparse.ArgumentParser(prog="zoo benchmark ptb-softmax")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--cutoffs", default="2000,6000", help="adaptive-softmax cutoffs, comma-separated")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    cutoffs = [int(c) for c in args.cutoffs.split(",")]
    print("command: zoo benchmark ptb-softmax " + " ".join(shlex.quote(a) for a in argv), flush=True)

    import keras

    import zoo
    from zoo.data import pipeline, ptb_tokenizer, read_lines

    vocab = ptb_tokenizer()
    models = {}
    for name, overrides in (("full", {}), ("adaptive", {"cutoffs": cutoffs})):
        keras.utils.set_random_seed(args.seed)
        model = zoo.load("gcnn-ptb", **overrides)
        model.compile()
        models[name] = model
    batches = pipeline.stream_dataset(read_lines("ptb", "train"), vocab, args.batch_size, args.seq_len,
                                      shuffle=True, seed=args.seed, repeat=True)
    from zoo.tools.benchmarks import side_by_side

    trained = side_by_side.train_side_by_side(models, batches, args.steps)
    valid = read_lines("ptb", "valid")
    results = {}
    for name, model in models.items():
        results[name] = {
            "median_step_s": trained[name]["median_step_s"],
            "valid_perplexity_stream": model.perplexity(valid, mode="stream"),
            "params": model.count_params(),
        }
    full, adaptive = results["full"], results["adaptive"]
    print(f"gcnn-ptb, {args.steps} steps of {args.batch_size}x{args.seq_len} tokens, seed {args.seed}, "
          f"adaptive cutoffs {cutoffs}")
    print(f"{'head':10s} {'params':>10s} {'median s/step':>14s} {'valid ppl (stream)':>19s}")
    for name, r in results.items():
        print(f"{name:10s} {r['params']:>10,d} {r['median_step_s']:>14.4f} {r['valid_perplexity_stream']:>19.2f}")
    speedup = full["median_step_s"] / adaptive["median_step_s"]
    gap = adaptive["valid_perplexity_stream"] / full["valid_perplexity_stream"] - 1
    print(f"step time full/adaptive: {speedup:.2f}x; adaptive perplexity vs full: {gap:+.1%}")
    from zoo.tools.benchmarks.common import write_results

    write_results(
        args.json, {"argv": argv, "cutoffs": cutoffs, "results": results, "speedup": speedup,
                    "perplexity_gap": gap})
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
