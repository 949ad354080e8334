"""`zoo generate`: a prefix continued by the model."""

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("generate", help="continue a prefix")
    s.add_argument("directory")
    s.add_argument("prefix")
    s.add_argument("--max-length", type=int, default=20)
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--top-k", type=int)
    s.add_argument("--seed", type=int)
    s.set_defaults(func=run)


def run(args):
    model = load_model(args.directory)
    print(model.generate(args.prefix, max_length=args.max_length, temperature=args.temperature,
                         top_k=args.top_k, seed=args.seed))
