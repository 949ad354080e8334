"""`zoo presets`: every preset with its description (and `--params`, its parameter count)."""


def add_parser(subparsers):
    s = subparsers.add_parser("presets", help="list the presets")
    s.add_argument("--params", action="store_true", help="parameter count at the paper's vocabulary")
    s.set_defaults(func=run)


def run(args):
    from zoo import registry
    from zoo.weights import TRAINED

    for name, preset in registry.PRESETS.items():
        line = f"{name:14s}"
        if args.params:
            line += f" {registry.count_params(name):>13,d}"
        trained = " Trained weights ship: zoo.load(name, weights=\"trained\")." if name in TRAINED else ""
        print(f"{line}  {preset.description}{trained}", flush=True)
