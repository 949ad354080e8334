"""`zoo export DIRECTORY --base exports --name NAME [--version N]`."""

import json
import os
import re


def default_name(directory):
    """The model name TF Serving will serve under: the preset name in the directory's config if it
    records one, else the directory's name — or, for a training run's `best/`, the run's name."""
    try:
        with open(os.path.join(directory, "config.json")) as f:
            preset = json.load(f).get("preset")
    except (OSError, ValueError, AttributeError):
        preset = None
    path = os.path.abspath(directory)
    name = preset or os.path.basename(path)
    if not preset and name == "best":
        name = os.path.basename(os.path.dirname(path))
    # a directory name and a URL path segment (/v1/models/NAME)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-") or "model"


def export_command(args):
    from export.saved_model import export_saved_model
    from zoo.registry import load

    directory = args.directory
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"The preset directory {directory!r} does not exist.")
    model = load(directory)
    if model.vocabulary is None:
        raise ValueError(f"The preset directory {directory!r} has no vocabulary.txt, which the exported "
                         "model needs to tokenise text.")
    name = args.name or default_name(directory)
    path = export_saved_model(model, args.base, name, version=args.version)
    print(path)
    return path
