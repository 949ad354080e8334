"""`zoo evaluate`: the perplexity of a preset directory on a split of a corpus."""

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("evaluate", help="perplexity of a preset directory on a split")
    s.add_argument("directory")
    s.add_argument("--data", default="ptb")
    s.add_argument("--split", help="train, valid or test (default: test; for --data FILE, one text file, "
                   "the whole file)")
    s.add_argument("--mode", default="stream", choices=["stream", "sentence"])
    s.set_defaults(func=run)


def run(args):
    import os

    from zoo.data.corpus import read_file_lines, read_lines, unknown_note

    model = load_model(args.directory)
    if args.split is None and os.path.isfile(args.data):
        # one file of the user's own text: all of it (its held-out parts are a 20th each)
        part, lines = "file", read_file_lines(args.data)
    else:
        part = args.split or "test"
        lines = read_lines(args.data, part)
    ppl = model.perplexity(lines, mode=args.mode)
    print(f"{part} perplexity ({args.mode}): {ppl:.2f}")
    # words plus one </s> per line, whatever the tokenizer: comparable across tokenizers
    per_word = model.perplexity(lines, mode=args.mode, per="word")
    print(f"{part} perplexity per word ({args.mode}): {per_word:.2f}")
    unknown = unknown_note(per_word.unknown_share)
    if unknown:  # a closed vocabulary: how much of the per-word figure is the easy <unk>
        print(f"{part} words: {unknown}")
