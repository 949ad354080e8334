"""`zoo benchmark input`: does the input pipeline keep up with the training step?

Side by side, in one process, with their timed rounds interleaved so machine noise hits both:

* pipeline: the dataset `zoo train` reads (`zoo.training.TrainingWindows` over the training
  stream of `--data`, the Penn Treebank by default, tokenised as `zoo train` would: `--tokenizer`,
  `--vocabulary-size`; through `distribute_datasets_from_function`), iterated with nothing else
  to do: tokens per second it can deliver. Text is tokenised once, before training (a learned
  subword vocabulary included): the time that takes is printed apart;
* step: the `gcnn-ptb` training step of `zoo train` (forward, backward, optimiser update) fed
  one batch already in memory, so it never waits on data: tokens per second it consumes.

The target is pipeline/step ≥ 20: the accelerator would never wait on data.
"""

import argparse
import shlex
import statistics
import sys
import time


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def main(argv):
    p = argparse.ArgumentParser(prog="zoo benchmark input")
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
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    print("command: zoo benchmark input " + " ".join(shlex.quote(a) for a in argv), flush=True)

    import tensorflow as tf

    from zoo import registry
    from zoo.tools.benchmarks.common import write_results
    from zoo.training import TrainingWindows, step_functions
    from zoo.training.data import load_corpus

    strategy = tf.distribute.get_strategy()
    started = time.perf_counter()
    lines, _, vocab = load_corpus(args.data, vocabulary_kind=registry.get_preset(args.preset).token_kind,
                                  tokenizer_kind=args.tokenizer, vocabulary_size=args.vocabulary_size, log=print)
    windows = TrainingWindows.from_lines(lines, vocab, args.seq_len, args.global_batch_size, seed=0)
    prepared = time.perf_counter() - started
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

    pipeline_rates, step_rates = _rounds(args, data, train_fn, fixed, tokens)
    pipe, step = statistics.median(pipeline_rates), statistics.median(step_rates)
    ratio = pipe / step
    _print_table(args, pipe, step)
    result = {"argv": argv, "tokenizer": getattr(vocab, "kind", "word"), "vocabulary_size": len(vocab),
              "prepare_s": prepared, "pipeline_tokens_per_s": pipe, "step_tokens_per_s": step, "ratio": ratio,
              "pipeline_rounds": pipeline_rates, "step_rounds": step_rates}
    write_results(args.json, result)
    return result


def _rounds(args, data, train_fn, fixed, tokens):
    """Tokens per second of the pipeline alone and of the step alone, round after round."""
    pipeline_rates, step_rates = [], []
    for r in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.batches):
            next(data)
        pipeline_rates.append(args.batches * tokens / (time.perf_counter() - start))
        start = time.perf_counter()
        for _ in range(args.steps):
            float(train_fn(fixed))  # float(): wait for the step to finish
        step_rates.append(args.steps * tokens / (time.perf_counter() - start))
        print(f"  round {r + 1}/{args.rounds}: pipeline {pipeline_rates[-1]:,.0f} tokens/s, "
              f"step {step_rates[-1]:,.0f} tokens/s", flush=True)
    return pipeline_rates, step_rates


def _print_table(args, pipe, step):
    import tensorflow as tf

    from zoo.tools.benchmarks.common import cpu_model

    ratio = pipe / step
    print(f"machine: {cpu_model()}, {len(tf.config.list_logical_devices('CPU'))} logical CPU device(s), "
          f"TensorFlow {tf.__version__}")
    print(f"{args.preset}, global batch {args.global_batch_size} x {args.seq_len} tokens, "
          f"{args.rounds} rounds (medians)")
    print(f"{'':28s} {'tokens/s':>12s}")
    print(f"{'input pipeline (alone)':28s} {pipe:>12,.0f}")
    print(f"{'training step (consumes)':28s} {step:>12,.0f}")
    print(f"pipeline/step: {ratio:.1f}x (target >= 20x: {'met' if ratio >= 20 else 'NOT met'})")


if __name__ == "__main__":
    main(sys.argv[1:])
