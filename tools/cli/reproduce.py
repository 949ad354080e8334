"""`zoo reproduce`: the papers' experiments (tools/reproduce/), their RESULTS.md and `--list`."""

from zoo.tools.cli import workshop

# where the reproductions write (zoo.tools.reproduce.record takes them from here, so that `zoo --help`
# works without the workshop)
DEFAULT_OUT = "results"
QUICK_OUT = "runs/reproduce-quick"  # where `--quick` writes unless --out is given: never over the real results


def add_parser(subparsers):
    s = subparsers.add_parser("reproduce", help="the papers' experiments: results/NAME.json, NAME.png, RESULTS.md "
                              "(see tools/reproduce/)")
    s.add_argument("name", nargs="?", help="the experiment (zoo reproduce --list)")
    s.add_argument("--list", action="store_true", help="list the experiments")
    s.add_argument("--quick", action="store_true", help=f"tiny models and inputs: a smoke test in seconds, written "
                   f"to {QUICK_OUT}/ unless --out is given (never over {DEFAULT_OUT}/)")
    s.add_argument("--out", help=f"folder of NAME.json / NAME.png (default {DEFAULT_OUT}/; with --quick, {QUICK_OUT}/)")
    s.add_argument("--repeats", type=int, help="timed repeats per measurement (default: the experiment's)")
    s.add_argument("--minutes", type=float,
                   help="training minutes per run of a curve experiment (default: the experiment's; a sweep's "
                        "runs get the same fraction of it)")
    s.add_argument("--redraw", action="store_true",
                   help="derive NAME.json's figures and NAME.png again from its stored units, measuring nothing")
    s.add_argument("--results", action="store_true",
                   help="rewrite RESULTS.md from OUT/*.json and OUT/benchmarks/*.md")
    s.add_argument("--results-file", help="where --results writes (default: RESULTS.md beside OUT)")
    s.set_defaults(func=run)


def run(args):
    experiments = workshop.room("reproduce", "zoo reproduce", needs=("matplotlib",))
    if args.out is None:
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    if args.list:
        for name, description, paper in experiments.list_experiments():
            print(f"{name:12s}  {paper}: {description}")
        return
    if args.name:
        if args.repeats is not None and args.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {args.repeats}.")
        if args.redraw:
            experiments.redraw(args.name, out=args.out)
        else:
            if args.minutes is not None and not args.minutes > 0:
                raise ValueError(f"--minutes must be a number > 0, got {args.minutes:g}.")
            experiments.reproduce(args.name, out=args.out, quick=args.quick, repeats=args.repeats, minutes=args.minutes)
    if args.results:
        experiments.write_results(args.out, args.results_file)
    if not args.name and not args.results:
        raise ValueError("Name an experiment (zoo reproduce --list), or give --list or --results.")
