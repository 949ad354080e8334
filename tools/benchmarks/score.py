"""`zoo benchmark score`: in-process `lm.score` of many texts in padded batches (the default)
against one call per text, side by side in one process.

How it measures: docs/benchmarks.md#score.
"""

import contextlib
import functools
import glob
import os
import statistics
from unittest import mock

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import preset_list

LICENCES = "/usr/share/common-licenses/*"


def read_texts(paths):
    """The non-blank lines of `paths` (files, or glob patterns), stripped."""
    from zoo.data.corpus import read_utf8_lines

    missing = [p for p in paths if not glob.glob(p)]
    if missing:
        raise ValueError(f"--text {missing[0]} names no file; give text files, or glob patterns that match some.")
    files = sorted({os.path.realpath(f) for p in paths for f in glob.glob(p)})  # a link's file once
    lines = [line.strip() for f in files for line in read_utf8_lines(f, "The text file") if line.strip()]
    if not lines:
        raise ValueError(f"No text to score in {', '.join(paths)}: give --text files (or patterns) with non-blank "
                         "lines.")
    return lines


def measure(model, lines, repeats):
    """`{"batched": [seconds...], "one_per_call": [...], "max_difference": float}`: `score` as it runs, and
    in batches of one row (one compiled call per text)."""
    import numpy as np

    from zoo.models import inference

    def score(way):
        with way:
            return model.score(lines)

    ways = {"batched": contextlib.nullcontext(), "one_per_call": mock.patch.object(inference, "SCORE_BATCH_ROWS", 1)}
    runs = harness.measure({name: functools.partial(score, way) for name, way in ways.items()}, repeats)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(*(runs[name]["result"] for name in ways)))
    return {**{name: runs[name]["times_s"] for name in ways}, "max_difference": difference}


def table(rows):
    out = []
    for r in rows:
        n, one, batched = r["texts"], *(statistics.median(r[way]) for way in ("one_per_call", "batched"))
        out.append([f"`{r['preset']}`", f"{n:,}", *(f"{t:.2f} ({n / t:,.0f})" for t in (one, batched)),
                    f"{one / batched:.2f}×", f"{r['max_difference']:.1e}"])
    return harness.markdown_table(["preset", "texts:", "one text per call: s (texts/s):", "batched: s (texts/s):",
                                   "× the speed:", "largest difference:"], out)


def main(argv=None):
    p = harness.parser("score", __doc__, 5, "timed calls of each way (default 5)")
    p.add_argument("--presets", default="gcnn-en,gcnn-ptb,lstmp-ptb",
                   help="comma-separated presets with trained weights, or preset directories")
    p.add_argument("--text", nargs="+", default=[LICENCES], help=f"files or globs to score (default {LICENCES})")
    args = p.parse_args(argv)
    harness.at_least_one(args, "repeats")
    import zoo

    lines = read_texts(args.text)
    rows = []
    for preset in preset_list(args.presets):
        model = zoo.load(preset, weights=None if os.path.isdir(preset) else "trained")
        rows.append({"preset": preset, "texts": len(lines), **measure(model, lines, args.repeats)})
        print(f"  {preset}: done", flush=True)
    rendered = table(rows)
    print(f"command: {harness.command('score', argv or [])}\n{harness.cpu_model()}, {len(lines):,} texts, median of "
          f"{args.repeats} calls each:")
    harness.report(args, {"cpu": harness.cpu_model(), "repeats": args.repeats, "texts": len(lines), "rows": rows,
                          "table": rendered}, rendered)
    return rows
