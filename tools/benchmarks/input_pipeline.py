"""`zoo benchmark input`: does the input pipeline keep up with the training step?

How it measures: docs/benchmarks.md#input.
"""

import argparse
import statistics
import sys

from zoo.tools.benchmarks import harness


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def main(argv):
    p = harness.parser("input", __doc__)
    p.add_argument("--preset", default="gcnn-ptb")
    p.add_argument("--global-batch-size", type=_positive, default=32)
    p.add_argument("--seq-len", type=_positive, default=64)
    p.add_argument("--rounds", type=_positive, default=5, help="timed rounds of each (medians are reported)")
    p.add_argument("--batches", type=_positive, default=500, help="pipeline batches per round")
    p.add_argument("--steps", type=_positive, default=10, help="training steps per round")
    p.add_argument("--data", default="ptb", help="the corpus, as for zoo train (default: the Penn Treebank)")
    p.add_argument("--tokenizer", choices=["word", "char", "subword"],
                   help="as for zoo train (default: the corpus' own, a learned subword vocabulary for raw text)")
    p.add_argument("--vocabulary-size", type=_positive, help="ids of a learned subword vocabulary")
    args = p.parse_args(argv)
    print(f"command: {harness.command('input', argv)}", flush=True)

    import tensorflow as tf

    from zoo import registry
    from zoo.training import TrainingWindows, step_functions
    from zoo.training.data import load_corpus

    strategy = tf.distribute.get_strategy()
    prepared, (lines, _, vocab) = harness.timed(
        load_corpus, args.data, vocabulary_kind=registry.get_preset(args.preset).token_kind,
        tokenizer_kind=args.tokenizer, vocabulary_size=args.vocabulary_size, log=print)
    windowed, windows = harness.timed(TrainingWindows.from_lines, lines, vocab, args.seq_len, args.global_batch_size,
                                      seed=0)
    prepared += windowed
    print(f"{getattr(vocab, 'kind', 'word')} vocabulary of {len(vocab):,} ids; corpus read, tokenised and cut into "
          f"windows in {prepared:.1f} s (once, before training)", flush=True)
    data = iter(strategy.distribute_datasets_from_function(lambda ctx: windows.dataset(0, ctx)))

    model = registry.load(args.preset, vocabulary_size=len(vocab))
    optimizer = model.make_optimizer()
    train_fn = step_functions(model, optimizer, strategy).train
    batch = next(data)
    fixed = iter(tf.data.Dataset.from_tensors(batch).repeat())
    tokens = args.global_batch_size * args.seq_len
    for _ in range(3):  # trace and warm up both
        train_fn(fixed)
        next(data)

    rates = harness.interleaved({  # tokens per second of the pipeline alone and of the step alone
        "pipeline": lambda: args.batches * tokens / harness.timed(lambda: [next(data) for _ in range(args.batches)])[0],
        "step": lambda: args.steps * tokens / harness.timed(lambda: [float(train_fn(fixed)) for _ in range(args.steps)])[0],
    }, args.rounds)  # float(): wait for the step to finish
    pipe, step = statistics.median(rates["pipeline"]), statistics.median(rates["step"])
    ratio = pipe / step
    print(f"machine: {harness.cpu_model()}, {len(tf.config.list_logical_devices('CPU'))} logical CPU device(s), "
          f"TensorFlow {tf.__version__}\n{args.preset}, global batch {args.global_batch_size} x {args.seq_len} tokens, "
          f"{args.rounds} rounds (medians)")
    table = harness.text_table([("", -28), ("tokens/s", 12)], [["input pipeline (alone)", f"{pipe:,.0f}"],
                                                                ["training step (consumes)", f"{step:,.0f}"]])
    result = {"argv": argv, "tokenizer": getattr(vocab, "kind", "word"), "vocabulary_size": len(vocab),
              "prepare_s": prepared, "pipeline_tokens_per_s": pipe, "step_tokens_per_s": step, "ratio": ratio,
              "pipeline_rounds": rates["pipeline"], "step_rounds": rates["step"]}
    return harness.report(args, result, f"{table}\npipeline/step: {ratio:.1f}x (target >= 20x: "
                                        f"{'met' if ratio >= 20 else 'NOT met'})")


if __name__ == "__main__":
    main(sys.argv[1:])
