"""`zoo reproduce`: the papers' experiments, measured on this machine and set beside the papers'
figures (installed as `zoo.tools.reproduce`).

    zoo reproduce --list                             name, what it measures, the paper's figure
    zoo reproduce NAME [--quick] [--out results/] [--repeats N] [--minutes M]
    zoo reproduce NAME --redraw [--out results/]    NAME.json's figures and NAME.png again from its units
    zoo reproduce --results [--out results/] [--results-file RESULTS.md]

A run writes `OUT/NAME.json` (every figure measured beside the paper's, the raw timings, the
machine, the exact command, the git commit) and `OUT/NAME.png`. It is resumable: each measured
unit (one timed repeat of one model in one mode, say) goes into `OUT/NAME.partial.json` as soon
as it is done, and a rerun with the same settings measures only the units that are missing; the
partial file is removed once the run is complete. `--quick` runs the same code on tiny models and
inputs (a smoke test for CI: its figures say nothing about the paper). `--results` rewrites
RESULTS.md (default: beside OUT, i.e. at the repository root for `results/`) from OUT/*.json, one
row per figure, and the benchmark tables of OUT/benchmarks/*.md.

The rooms: `harness` (run, resume, redraw), `record` (machine, commit, command), `results`
(RESULTS.md), `experiments/` (one module per experiment or family of them, found without a list:
see its docstring for what an experiment provides), `curves` and `curve_plot` (what the
training-curve experiments share), and `gpu_recipe.sh` (the GPU runs, one prepared call).
"""

from zoo.tools.reproduce.experiments import experiment, experiments, list_experiments
from zoo.tools.reproduce.harness import redraw, reproduce
from zoo.tools.reproduce.results import results_markdown, write_results

__all__ = ["experiment", "experiments", "list_experiments", "redraw", "reproduce", "results_markdown",
           "write_results"]
