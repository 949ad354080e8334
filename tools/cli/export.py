"""`zoo export`: a preset directory as a versioned SavedModel for TF Serving."""

import os
import re

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("export", help="export a preset directory as a SavedModel for TF Serving")
    s.add_argument("directory", help="a preset directory (e.g. runs/gcnn-ptb/best)")
    s.add_argument("--base", default="exports", help="TF Serving base directory")
    s.add_argument("--name", help="model name (default: the directory's name, or the run's for a run's best/)")
    s.add_argument("--version", type=int, help="version number (default: one above the highest present)")
    s.add_argument("--max-new-tokens", type=int, default=256,
                   help="the most new tokens the generate signature writes a request (default 256)")
    s.add_argument("--batch-sizes", help="batch sizes of the warmup records and of the example "
                                          "assets.extra/batching_parameters.txt (default 1,2,4,8,16,32)")
    s.add_argument("--batching-file", help="your model server's --batching_parameters_file: the warmup covers its "
                                           "allowed_batch_sizes")
    s.add_argument("--quantize", metavar="MODE", help="int8: the weights as int8 with a scale per output channel, "
                                                       "quantized in memory (see docs/serving.md)")
    s.add_argument("--head-blocks", type=int, metavar="N",
                   help="generate at fewer than 8 rows computes a full or tied output layer as N products over "
                        "blocks of ids, side by side on the cores (default 1: one product, whatever the exporting "
                        "machine; see docs/serving.md)")
    s.set_defaults(func=run)


def default_export_name(directory):
    """The name TF Serving serves a preset directory under: the directory's name or, for a training
    run's `best/`, the run's name; made a valid directory name and URL path segment
    (`/v1/models/NAME`)."""
    path = os.path.abspath(directory)
    name = os.path.basename(path)
    if name == "best":
        name = os.path.basename(os.path.dirname(path))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-") or "model"


def run(args):
    from zoo.export import export_saved_model, warmup

    batch_sizes = None  # checked before the model is loaded
    if args.batch_sizes is not None:
        try:
            batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
        except ValueError:
            raise ValueError(f"--batch-sizes takes whole numbers separated by commas, e.g. 1,4,16; got "
                             f"{args.batch_sizes!r}.") from None
    batch_sizes = warmup.sizes_of(args.batching_file, batch_sizes)
    model = load_model(args.directory, quantize=args.quantize)
    if model.tokenizer is None:
        raise ValueError(f"The preset directory {args.directory!r} has no tokenizer, which the exported "
                         "model needs to read text.")
    print(export_saved_model(model, args.base, args.name or default_export_name(args.directory),
                             version=args.version, max_new_tokens=args.max_new_tokens, batch_sizes=batch_sizes,
                             head_blocks=args.head_blocks))
