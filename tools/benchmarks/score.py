"""`zoo benchmark score`: in-process `lm.score` of many texts, run together in padded batches
(`zoo.models.inference.score_batches`, the default) against one call per text (what `score` did
before), side by side in one process.

How it measures: docs/benchmarks.md#score.
"""

import contextlib
import glob
import os
import statistics

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import preset_list

LICENCES = "/usr/share/common-licenses/*"


@contextlib.contextmanager
def one_text_per_call():
    """`score` with batches of one row: one compiled call per text, as before batching."""
    from zoo.models import inference

    rows = inference.SCORE_BATCH_ROWS
    inference.SCORE_BATCH_ROWS = 1
    try:
        yield
    finally:
        inference.SCORE_BATCH_ROWS = rows


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
    """`{"batched": [seconds...], "one_per_call": [...], "max_difference": float}`."""
    import numpy as np

    ways = {"batched": contextlib.nullcontext, "one_per_call": one_text_per_call}
    scores = {}
    for name, way in ways.items():
        with way():
            scores[name] = model.score(lines)  # untimed: traces the compiled functions

    def call(way):
        with way():
            return harness.timed(model.score, lines)[0]

    times = harness.interleaved({name: (lambda way=way: call(way)) for name, way in ways.items()}, repeats)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(scores["batched"], scores["one_per_call"]))
    return {**times, "max_difference": difference}


def table(rows):
    out = []
    for r in rows:
        one, batched = statistics.median(r["one_per_call"]), statistics.median(r["batched"])
        out.append([f"`{r['preset']}`", f"{r['texts']:,}", f"{one:.2f} ({r['texts'] / one:,.0f})",
                    f"{batched:.2f} ({r['texts'] / batched:,.0f})", f"{one / batched:.2f}×", f"{r['max_difference']:.1e}"])
    return harness.markdown_table(["preset", "texts:", "one text per call: s (texts/s):", "batched: s (texts/s):",
                                   "× the speed:", "largest difference:"], out)


def main(argv=None):
    p = harness.parser("score", __doc__, 5, "timed calls of each way (default 5)")
    p.add_argument("--presets", default="gcnn-en,gcnn-ptb,lstmp-ptb",
                   help="comma-separated presets with trained weights, or preset directories")
    p.add_argument("--text", nargs="+", default=[LICENCES], help=f"files (or glob patterns) whose lines are "
                   f"scored (default: {LICENCES})")
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
