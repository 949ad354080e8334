"""The one atomic JSON writer of the project: the library's run records and training history, the
tokenizer extension's record, and the workshop's results all go through `write_json`."""

import json
import os


def write_json(path, value, indent=1, ensure_ascii=True):
    """`value` as JSON at `path`, whole or not at all: written to `PATH.tmp` beside it, then renamed
    over it, so that an interrupted write (or a value JSON cannot hold) leaves the old file as it
    was."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=indent, ensure_ascii=ensure_ascii)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
