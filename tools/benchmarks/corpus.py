"""The benchmarks of `zoo train`'s step on a corpus's own windows: `zoo benchmark input` (`input_main`:
does the input pipeline keep up with the step?) and `raw-text` (`raw_text`: a subword model's words
per second against a word model's). How each measures: docs/benchmarks.md#input, #raw-text.
"""

import argparse
import statistics

from zoo.tools.benchmarks import harness


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def distributed(windows):
    """An iterator over `windows`' training batches, as `zoo train` reads them."""
    import tensorflow as tf

    return iter(tf.distribute.get_strategy().distribute_datasets_from_function(lambda ctx: windows.dataset(0, ctx)))


def repeated(batches):
    """An iterator over the training batches `batches`, round and round, as a distributed dataset."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(tuple(tf.stack([b[i] for b in batches]) for i in range(3)))
    return iter(tf.distribute.get_strategy().experimental_distribute_dataset(dataset.repeat()))


# ---- input: the input pipeline against the training step -----------------------------------------
def input_main(argv):
    """`zoo benchmark input`: does the input pipeline keep up with the training step?"""
    p = harness.parser("input", input_main.__doc__)
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

    prepared, (lines, _, vocab) = harness.timed(
        load_corpus, args.data, vocabulary_kind=registry.get_preset(args.preset).token_kind,
        tokenizer_kind=args.tokenizer, vocabulary_size=args.vocabulary_size, log=print)
    windowed, windows = harness.timed(TrainingWindows.from_lines, lines, vocab, args.seq_len, args.global_batch_size,
                                      seed=0)
    prepared += windowed
    print(f"{getattr(vocab, 'kind', 'word')} vocabulary of {len(vocab):,} ids; corpus read, tokenised and cut into "
          f"windows in {prepared:.1f} s (once, before training)", flush=True)
    data = distributed(windows)
    model = registry.load(args.preset, vocabulary_size=len(vocab))
    train_fn = step_functions(model, model.make_optimizer(), tf.distribute.get_strategy()).train
    fixed, tokens = iter(tf.data.Dataset.from_tensors(next(data)).repeat()), args.global_batch_size * args.seq_len
    for _ in range(3):  # trace and warm up both
        train_fn(fixed)
        next(data)

    def step_rate():  # float(): wait for the step to finish
        return args.steps * tokens / harness.timed(lambda: [float(train_fn(fixed)) for _ in range(args.steps)])[0]

    rates = harness.interleaved({  # tokens per second of the pipeline alone and of the step alone
        "pipeline": lambda: args.batches * tokens / harness.timed(lambda: [next(data) for _ in range(args.batches)])[0],
        "step": step_rate}, args.rounds)
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


# ---- raw-text: a subword model's words per second against a word model's -------------------------
def raw_text(argv):
    """`zoo benchmark raw-text --data DIR`: where the time of a training step goes on raw text, and
    how many words per second a subword model can reach against a word model at all."""
    parser = harness.parser("raw-text", raw_text.__doc__, 30)
    parser.add_argument("--data", required=True, help="a raw-text directory (train/valid/test.txt) or file")
    parser.add_argument("--preset", default="gcnn-ptb")
    parser.add_argument("--vocabulary-size", type=int, default=None, help="subword ids (default: zoo train's)")
    parser.add_argument("--small", action="store_true", help="a tiny model and few repeats (tests)")
    args = parser.parse_args(argv)
    batch, seq_len = (4, 16) if args.small else (32, 64)
    runs, per_word = _runs(args, batch, seq_len)
    calls = {name: (lambda run=run, it=repeated(run[1]): float(run[0].train(it))) for name, run in runs.items()}
    measured, tokens, report = harness.measure(calls, 3 if args.small else args.repeats, 2), batch * seq_len, {}
    for name, run in runs.items():  # the word model first
        seconds = measured[name]["median_s"]
        r = report[name] = {"ids": run[2], "cutoffs": run[3], "seconds_per_step": seconds,
                            "tokens_per_word": per_word[name], "words_per_second": tokens / seconds / per_word[name]}
        r["words_per_second_vs_word"] = r["words_per_second"] / report["word"]["words_per_second"]
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
    runs, per_word = {}, {}
    for kind in ("word", "subword"):
        lines, _, vocabulary = load_corpus(args.data, None, "word", 1, None, kind,
                                           args.vocabulary_size if kind == "subword" else None, log=lambda m: None)
        pieces = sum(len(ids) - 1 for ids in vocabulary.encode_batch(lines))  # targets: pieces + </s>
        per_word[kind] = pieces / scored_words(lines)
        source = distributed(TrainingWindows.from_lines(lines, vocabulary, seq_len, batch, 0))
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
