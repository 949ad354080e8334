"""The `zoo` command line (installed as `zoo.tools.cli`; the console script `zoo` and `python -m zoo`
call `main`): one module per subcommand, each adding its parser with `add_parser(subparsers)`."""

import argparse
import sys

from zoo.tools.cli import benchmark, convert, evaluate, export, generate, presets, reproduce, score, train

# In the order `zoo --help` lists them.
COMMANDS = (presets, train, evaluate, score, generate, export, benchmark, reproduce, convert)


def parser():
    p = argparse.ArgumentParser(prog="zoo", description="Gated convolutional and MoE language models.")
    subparsers = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return p


def _subcommand_parser(p, args):
    """The parser of the (innermost) subcommand `args` were parsed for."""
    while True:
        actions = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or getattr(args, actions[0].dest, None) not in actions[0].choices:
            return p
        p = actions[0].choices[getattr(args, actions[0].dest)]


def main(argv=None):
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:  # told with the subcommand's own usage (`zoo generate --top_k 5`), not the top level's
        _subcommand_parser(p, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    return 0
