"""`zoo evaluate`: the perplexity of a preset directory on a split of a corpus."""

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("evaluate", help="perplexity of a preset directory on a split")
    s.add_argument("directory")
    s.add_argument("--data", default="ptb")
    s.add_argument("--split", default="test")
    s.add_argument("--mode", default="stream", choices=["stream", "sentence"])
    s.set_defaults(func=run)


def run(args):
    from zoo.data.corpus import read_lines, unknown_note

    model = load_model(args.directory)
    lines = read_lines(args.data, args.split)
    ppl = model.perplexity(lines, mode=args.mode)
    print(f"{args.split} perplexity ({args.mode}): {ppl:.2f}")
    # words plus one </s> per line, whatever the tokenizer: comparable across tokenizers
    per_word = model.perplexity(lines, mode=args.mode, per="word")
    print(f"{args.split} perplexity per word ({args.mode}): {per_word:.2f}")
    unknown = unknown_note(per_word.unknown_share)
    if unknown:  # a closed vocabulary: how much of the per-word figure is the easy <unk>
        print(f"{args.split} words: {unknown}")
