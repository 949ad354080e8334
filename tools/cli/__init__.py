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


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    return 0
