"""`zoo export`: a preset directory as a versioned SavedModel for TF Serving (`--format
saved_model`, the default) or as a LiteRT export (`--format litert`: `BASE/NAME/litert/`, or
`litert-int8/` with `--quantize int8`, beside the versions, which TF Serving alone reads: it
serves integer-named directories only)."""

import os
import re

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("export", help="export a preset directory as a SavedModel for TF Serving, or for LiteRT")
    s.add_argument("directory", help="a preset directory (e.g. runs/gcnn-ptb/best)")
    s.add_argument("--base", default="exports", help="TF Serving base directory (LiteRT: BASE/NAME/litert/)")
    s.add_argument("--format", default="saved_model", metavar="FORMAT",
                   help="saved_model (default: BASE/NAME/VERSION/ for TF Serving) or litert (BASE/NAME/litert/, "
                        "or litert-int8/ with --quantize int8: one .tflite file, the tokenizer's files and "
                        "zoo_litert.json; see docs/serving.md)")
    s.add_argument("--name", help="model name (default: the directory's name, or the run's for a run's best/)")
    s.add_argument("--version", type=int, help="version number (default: one above the highest present)")
    s.add_argument("--max-new-tokens", type=int,
                   help="the most new tokens the generate signature writes a request (default 256)")
    s.add_argument("--batch-sizes", help="batch sizes of the warmup records and of the example "
                                          "assets.extra/batching_parameters.txt (default 1,2,4,8,16,32)")
    s.add_argument("--batching-file", help="your model server's --batching_parameters_file: the warmup covers its "
                                           "allowed_batch_sizes")
    s.add_argument("--quantize", metavar="MODE", help="int8: the weights as int8 with a scale per output channel, "
                                                       "quantized in memory (saved_model) or by the LiteRT "
                                                       "converter (litert; see docs/serving.md)")
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


FORMATS = ("saved_model", "litert")
SAVED_MODEL_ONLY = ("version", "max_new_tokens", "batch_sizes", "batching_file", "head_blocks")


def litert_path(base, name, quantize=None):
    """Where `zoo export --format litert` writes: `BASE/NAME/litert/` (`litert-int8/` for int8)."""
    return os.path.join(base, name, "litert" if quantize is None else f"litert-{quantize}")


def run(args):
    from zoo.export import export_saved_model, warmup

    if args.format not in FORMATS:
        raise ValueError(f"Unknown export format {args.format!r}; zoo export writes {' or '.join(FORMATS)}.")
    if args.format == "litert":
        return run_litert(args)

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
                             version=args.version, max_new_tokens=256 if args.max_new_tokens is None else
                             args.max_new_tokens, batch_sizes=batch_sizes,
                             head_blocks=args.head_blocks))


def run_litert(args):
    from zoo.export import export_litert
    from zoo.export.litert import QUANTIZATIONS

    given = [name for name in SAVED_MODEL_ONLY if getattr(args, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"{flags} {'applies' if len(given) == 1 else 'apply'} to --format saved_model only; a "
                         "LiteRT export has no versions, warmup or generate signature.")
    if args.quantize not in QUANTIZATIONS:
        raise ValueError(f"Unknown quantization mode {args.quantize!r} for --format litert; it takes --quantize int8 "
                         "(the converter's int8 weights with a scale per output channel).")
    name = args.name or default_export_name(args.directory)
    if not name or name in (".", "..") or name.startswith(".") or "/" in name or os.sep in name:
        raise ValueError(f"The model name must be a non-empty directory name not starting with '.', got {name!r}.")
    model = load_model(args.directory)  # float32: the converter quantizes
    if model.tokenizer is None:
        raise ValueError(f"The preset directory {args.directory!r} has no tokenizer, which the exported "
                         "model needs to read text.")
    print(export_litert(model, litert_path(args.base, name, args.quantize), quantize=args.quantize))
