"""`zoo benchmark input`: does the input pipeline keep up with the training step?

Side by side, in one process, with their timed rounds interleaved so machine noise hits both:

* pipeline: the dataset `zoo train` reads (`zoo.training.TrainingWindows` over the Penn Treebank
  training stream, through `distribute_datasets_from_function`), iterated with nothing else to
  do: tokens per second it can deliver;
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


def input_pipeline(argv):
    p = argparse.ArgumentParser(prog="zoo benchmark input")
    p.add_argument("--preset", default="gcnn-ptb")
    p.add_argument("--global-batch-size", type=_positive, default=32)
    p.add_argument("--seq-len", type=_positive, default=64)
    p.add_argument("--rounds", type=_positive, default=5, help="timed rounds of each (medians are reported)")
    p.add_argument("--batches", type=_positive, default=500, help="pipeline batches per round")
    p.add_argument("--steps", type=_positive, default=10, help="training steps per round")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    print("command: zoo benchmark input " + " ".join(shlex.quote(a) for a in argv), flush=True)

    import tensorflow as tf

    from zoo import registry
    from zoo.data import ptb_vocabulary, read_lines
    from zoo.training import TrainingWindows, step_functions

    from zoo.tools import benchmarks as common
    strategy = tf.distribute.get_strategy()
    vocab = ptb_vocabulary()
    windows = TrainingWindows.from_lines(read_lines("ptb", "train"), vocab, args.seq_len,
                                         args.global_batch_size, seed=0)
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

    pipe, step = statistics.median(pipeline_rates), statistics.median(step_rates)
    ratio = pipe / step
    print(f"machine: {common._cpu_model()}, {len(tf.config.list_logical_devices('CPU'))} logical CPU device(s), "
          f"TensorFlow {tf.__version__}")
    print(f"{args.preset}, global batch {args.global_batch_size} x {args.seq_len} tokens, "
          f"{args.rounds} rounds (medians)")
    print(f"{'':28s} {'tokens/s':>12s}")
    print(f"{'input pipeline (alone)':28s} {pipe:>12,.0f}")
    print(f"{'training step (consumes)':28s} {step:>12,.0f}")
    print(f"pipeline/step: {ratio:.1f}x (target >= 20x: {'met' if ratio >= 20 else 'NOT met'})")
    result = {"argv": argv, "pipeline_tokens_per_s": pipe, "step_tokens_per_s": step, "ratio": ratio,
              "pipeline_rounds": pipeline_rates, "step_rounds": step_rates}
    common.write_results(args.json, result)
    return result


if __name__ == "__main__":
    input_pipeline(sys.argv[1:])
