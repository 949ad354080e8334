"""`zoo benchmark NAME [args...]`: a benchmark of tools/benchmarks/, with its own flags."""

import argparse

from zoo.tools import benchmarks


def add_parser(subparsers):
    s = subparsers.add_parser("benchmark", help="speed benchmarks (see tools/benchmarks/)")
    s.add_argument("name", help=f"one of {', '.join(benchmarks.names())} (zoo benchmark NAME --help: its flags)")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(func=run)


def run(args):
    benchmarks.run(args.name, args.rest)
