"""`zoo evaluate`: the perplexity of a preset directory on a split of a corpus, or on the whole of
one text file."""

from zoo.tools.cli.loading import load_model


def _figure(value):
    """A perplexity as printed: two decimals, or 4 significant digits from 10^9 on (a text a model
    reads very badly would print as dozens of digits)."""
    return f"{value:.2f}" if value < 1e9 else f"{value:.4g}"


def add_parser(subparsers):
    s = subparsers.add_parser("evaluate", help="perplexity of a preset directory on a split, or on a whole text file")
    s.add_argument("directory")
    s.add_argument("--data", default="ptb")
    s.add_argument("--split", default="test",
                   help="train, valid or test (default test); `all` scores every line of --data, one text file "
                        "(its training lines included, if a model was trained on it)")
    s.add_argument("--mode", default="stream", choices=["stream", "sentence"])
    s.add_argument("--seq-len", type=int, default=128, help="scored tokens per stream window (default 128)")
    s.add_argument("--context", type=int, default=None,
                   help="unscored tokens of left context per stream window (default: the model's, exact for a "
                        "GCNN); fairseq's eval_lm --tokens-per-sample T --context-window C is --seq-len T-C --context C")
    s.add_argument("--keep-empty-lines", action="store_true",
                   help="with --split all: score a blank line as one </s>, as fairseq's eval_lm does")
    s.add_argument("--quantize", metavar="MODE", help="int8: the weights as int8 with a scale per output channel, "
                                                       "quantized in memory (see docs/serving.md)")
    s.set_defaults(func=run)


def run(args):
    import os

    from zoo.data.corpus import read_file_lines, read_lines, unknown_note

    if args.split != "all" and args.split not in ("train", "valid", "test", "validation", "dev"):
        raise ValueError(f"Unknown split {args.split!r}; expected train, valid or test, or all (every line of one "
                         "text file).")
    if args.split == "all" and (args.data == "ptb" or not os.path.isfile(args.data)):
        raise ValueError(f"--split all scores one whole text file, and --data {args.data!r} is not one; give a "
                         "file, or a split: train, valid or test.")
    model = load_model(args.directory, quantize=args.quantize)
    if args.keep_empty_lines and args.split != "all":
        raise ValueError("--keep-empty-lines applies to one whole text file (--split all), whose blank lines it "
                         f"keeps; --split {args.split} reads a corpus split without them.")
    if args.split == "all":
        lines = read_file_lines(args.data, keep_empty=args.keep_empty_lines)
    else:
        lines = read_lines(args.data, args.split)
    windows = dict(seq_len=args.seq_len, context=args.context)
    ppl = model.perplexity(lines, mode=args.mode, **windows)
    print(f"{args.split} perplexity ({args.mode}): {_figure(ppl)}")
    # words plus one </s> per line, whatever the tokenizer: comparable across tokenizers
    per_word = model.perplexity(lines, mode=args.mode, per="word", **windows)
    print(f"{args.split} perplexity per word ({args.mode}): {_figure(per_word)}")
    unknown = unknown_note(per_word.unknown_share)
    if unknown:  # a closed vocabulary: how much of the per-word figure is the easy <unk>
        print(f"{args.split} words: {unknown}")
    # the same total over the text's bytes and characters: no tokenizer in the figure
    print(f"{args.split} bits per byte ({args.mode}): {ppl.bits_per_byte:.4f}; per character: "
          f"{ppl.bits_per_character:.4f}")
    # how much of the total a few costly "words" (a separator line, a symbol run) carry
    print(f"{args.split} the costliest 1% of the words ({args.mode}): {ppl.worst_words_share:.1%} of the total")
