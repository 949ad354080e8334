"""`zoo benchmark raw-text --data DIR`: where the time of a training step goes on raw text, and
how many words per second a subword model can reach against a word model at all.

How it measures: docs/benchmarks.md#raw-text.
"""

import statistics
import sys

from zoo.tools.benchmarks import harness


def main(argv):
    parser = harness.parser("raw-text", __doc__, 30)
    parser.add_argument("--data", required=True, help="a raw-text directory (train/valid/test.txt) or file")
    parser.add_argument("--preset", default="gcnn-ptb")
    parser.add_argument("--vocabulary-size", type=int, default=None, help="subword ids (default: zoo train's)")
    parser.add_argument("--small", action="store_true", help="a tiny model and few repeats (tests)")
    args = parser.parse_args(argv)
    batch, seq_len = (4, 16) if args.small else (32, 64)
    runs, per_word = _runs(args, batch, seq_len)
    times = _time_steps(runs, 3 if args.small else args.repeats)
    tokens = batch * seq_len
    report = {}
    for name, run in runs.items():
        seconds = statistics.median(times[name])
        report[name] = {"ids": run[2], "cutoffs": run[3], "seconds_per_step": seconds,
                        "tokens_per_word": per_word[name], "words_per_second": tokens / seconds / per_word[name]}
    for name in report:
        report[name]["words_per_second_vs_word"] = report[name]["words_per_second"] / report["word"]["words_per_second"]
    print(f"command: {harness.command('raw-text', argv)}")
    return harness.report(args, report, harness.text_table(
        [("model", -8), ("ids", 7), ("output layer", 22), ("ms/step", 8), ("tokens/word", 12), ("words/s", 9),
         ("vs word", 8)],
        [[name, f"{r['ids']:,}", f"adaptive {r['cutoffs']}" if r["cutoffs"] else "full softmax",
          f"{r['seconds_per_step'] * 1000:.1f}", f"{r['tokens_per_word']:.3f}", f"{r['words_per_second']:,.0f}",
          f"{r['words_per_second_vs_word']:.2f}x"] for name, r in report.items()]))


def _runs(args, batch, seq_len):
    """`{name: (step functions, batches, ids, cutoffs)}` of the word, subword and body models, and
    the corpus's tokens per scored word for each."""
    import keras
    import tensorflow as tf

    from zoo.data.corpus import scored_words
    from zoo.training.data import TrainingWindows, load_corpus
    from zoo.training.steps import step_functions
    from zoo.training.trainer import ADAPTIVE_THRESHOLD, build_model, default_cutoffs

    strategy = tf.distribute.get_strategy()
    small = {"embedding_dim": 16, "blocks": [[[3, 16]], [[3, 16]]]} if args.small else {}
    quiet = lambda message: None  # noqa: E731
    runs, per_word = {}, {}
    for kind in ("word", "subword"):
        lines, _, vocabulary = load_corpus(args.data, None, "word", 1, None, kind,
                                           args.vocabulary_size if kind == "subword" else None, log=quiet)
        pieces = sum(len(ids) - 1 for ids in vocabulary.encode_batch(lines))  # targets: pieces + </s>
        per_word[kind] = pieces / scored_words(lines)
        windows = TrainingWindows.from_lines(lines, vocabulary, seq_len, batch, 0)
        source = iter(strategy.distribute_datasets_from_function(lambda ctx, w=windows: w.dataset(0, ctx)))
        batches = [next(source) for _ in range(8)]
        cutoffs = default_cutoffs(len(vocabulary)) if len(vocabulary) > ADAPTIVE_THRESHOLD else None
        keras.utils.set_random_seed(0)
        model, optimizer = build_model(args.preset, {"vocabulary_size": len(vocabulary), "cutoffs": cutoffs, **small},
                                       vocabulary, strategy)
        runs[kind] = (step_functions(model, optimizer, strategy), batches, len(vocabulary), cutoffs)
        if kind == "subword":
            keras.utils.set_random_seed(0)
            model, optimizer = build_model(args.preset, {"vocabulary_size": 300, "cutoffs": None, **small},
                                           None, strategy)
            body = [tuple(tf.math.floormod(t, 300) if t.dtype.is_integer else t for t in b) for b in batches]
            runs["body"] = (step_functions(model, optimizer, strategy), body, 300, None)
            per_word["body"] = per_word["subword"]
    return runs, per_word


def _time_steps(runs, repeats):
    """Seconds of each run's train step over its batches, two warm-up steps each, then the runs'
    timed steps interleaved round by round."""
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()

    def stream(batches):
        stacked = tuple(tf.stack([b[i] for b in batches]) for i in range(3))
        return iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(stacked).repeat()))

    calls = {name: (lambda run=run, it=stream(run[1]): float(run[0].train(it))) for name, run in runs.items()}
    return {name: r["times_s"] for name, r in harness.measure(calls, repeats, warmup=2).items()}


if __name__ == "__main__":
    main(sys.argv[1:])
