"""`zoo benchmark NAME [args...]`: a benchmark of tools/benchmarks/, with its own flags."""

import argparse

from zoo.tools.cli import workshop


def add_parser(subparsers):
    s = subparsers.add_parser("benchmark", help="speed benchmarks (see tools/benchmarks/; the workshop)")
    try:
        names = f"one of {', '.join(workshop.room('benchmarks', 'zoo benchmark').names())}"
    except workshop.WorkshopNotInstalled as e:
        names = str(e)
    s.add_argument("name", help=f"{names} (zoo benchmark NAME --help: its flags)")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(func=run)


def run(args):
    workshop.room("benchmarks", "zoo benchmark").run(args.name, args.rest)
