"""`zoo generate`: prompts continued by the model, in batches, one output line per prompt."""

import argparse
import sys

from zoo.data.corpus import read_utf8_lines
from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser(
        "generate", help="continue prompts (batched)",
        description="Continue each prompt and print one line per prompt, in the prompts' order. Prompts come "
                    "from the command line or from --file (one per line; '-' reads standard input); an empty "
                    "prompt starts from <s>. Without --sampler: --temperature 0 is greedy, --top-k / --top-p "
                    "sample among the likeliest, else a draw from the whole distribution.")
    s.add_argument("directory", help="a preset directory, or a preset with trained weights (gcnn-ptb)")
    s.add_argument("prompts", nargs="*", metavar="prompt", help="prompts to continue")
    s.add_argument("--file", help="a text file of prompts, one per line ('-': standard input)")
    s.add_argument("--max-new-tokens", type=int, help="new tokens per prompt (default 20)")
    s.add_argument("--max-length", type=int, help=argparse.SUPPRESS)  # the deprecated name of --max-new-tokens
    s.add_argument("--sampler", help="greedy, random, top_k, top_p or beam")
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--top-p", type=float)
    s.add_argument("--num-beams", type=int, help="beam search with this many beams (1: none)")
    s.add_argument("--length-penalty", type=float, help="beam search: rank by log-prob / length ** this")
    s.add_argument("--no-repeat-ngram-size", type=int, default=0, help="never repeat an n-gram of this size")
    s.add_argument("--stop", action="append", help="end a row where this text appears (repeatable)")
    s.add_argument("--seed", type=int)
    s.add_argument("--batch-size", type=int, default=32, help="prompts decoded together (default 32)")
    s.add_argument("--xla", choices=("auto", "on", "off"), default="auto",
                   help="compile the decoding loop with XLA: auto (default: where it can), on, off")
    s.set_defaults(func=run)


def read_prompts(args):
    if args.file is not None and args.prompts:
        raise ValueError("Give prompts on the command line or with --file, not both.")
    if args.file is None:
        if not args.prompts:
            raise ValueError("No prompt: give one or more prompts, or --file with one prompt per line.")
        return list(args.prompts)
    if args.file == "-":
        prompts = [line.rstrip("\r\n") for line in sys.stdin]
        prompts[:1] = [p.removeprefix("\ufeff") for p in prompts[:1]]  # no byte-order mark
    else:
        try:
            lines = read_utf8_lines(args.file, "The prompts file")
        except OSError as e:
            raise ValueError(f"Cannot read the prompts file {args.file!r}: {e.strerror or e}.") from e
        prompts = [line.rstrip("\r") for line in (lines[:-1] if lines[-1] == "" else lines)]
    if not prompts:
        where = "standard input" if args.file == "-" else f"the prompts file {args.file!r}"
        raise ValueError(f"No prompt: {where} is empty; give one prompt per line.")
    return prompts


def new_tokens(args):
    """--max-new-tokens, or its deprecated name --max-length (a warning on standard error)."""
    if args.max_length is None:
        return 20 if args.max_new_tokens is None else args.max_new_tokens
    if args.max_new_tokens is not None:
        raise ValueError("Give the number of new tokens once, as --max-new-tokens (--max-length is its deprecated "
                         "name), not both.")
    print("zoo generate: --max-length is deprecated, use --max-new-tokens (the same number of new tokens).",
          file=sys.stderr)
    return args.max_length


def run(args):
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}.")
    prompts = read_prompts(args)
    model = load_model(args.directory)
    model.require_tokenizer()
    options = dict(max_new_tokens=new_tokens(args), sampler=args.sampler, temperature=args.temperature,
                   top_k=args.top_k, top_p=args.top_p, num_beams=args.num_beams, length_penalty=args.length_penalty,
                   no_repeat_ngram_size=args.no_repeat_ngram_size, seed=args.seed,
                   jit_compile={"auto": "auto", "on": True, "off": False}[args.xla])
    if args.stop:
        options["stop"] = args.stop
    for start in range(0, len(prompts), args.batch_size):
        if args.seed is not None:  # a batch's rows draw by (seed, row): each batch its own seed
            options["seed"] = args.seed + start
        for line in model.generate(prompts[start:start + args.batch_size], **options):
            print(line.replace("\n", " "), flush=True)
