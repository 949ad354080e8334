"""The `zoo` command line (installed as `zoo.tools.cli`; the console script `zoo` and `python -m zoo`
call `main`): one module per subcommand, each adding its parser with `add_parser(subparsers)`."""

import argparse
import sys

from zoo.tools.cli import benchmark, convert, evaluate, export, generate, presets, reproduce, score, train, workshop

# In the order `zoo --help` lists them.
COMMANDS = (presets, train, evaluate, score, generate, export, benchmark, reproduce, convert)


def parser():
    p = argparse.ArgumentParser(prog="zoo", description="Gated convolutional and MoE language models.")
    subparsers = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return p


def _subcommand_parser(p, args, argv, token):
    """The parser of the innermost subcommand `args` were parsed for whose name comes before
    `token` in `argv` (a flag given before a subcommand's name is its parent's)."""
    at = argv.index(token) if token in argv else len(argv)
    while True:
        actions = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, actions[0].dest, None) if actions else None
        if name not in (actions[0].choices if actions else ()) or name not in argv[:at]:
            return p
        p = actions[0].choices[name]


def main(argv=None):
    p = parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = p.parse_known_args(argv)
    if unknown:  # told with the subcommand's own usage (`zoo generate --top_k 5`), not the top level's
        _subcommand_parser(p, args, argv, unknown[0]).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, FloatingPointError, workshop.WorkshopNotInstalled) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, not Python's traceback
        again = " (the same command resumes the run from its last checkpoint)" if args.command == "train" else ""
        print(f"\nzoo: interrupted{again}.", file=sys.stderr)
        return 130
    return 0
