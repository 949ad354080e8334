"""The benchmarks behind `zoo benchmark NAME [args...]`: one module per benchmark, each with a
`main(argv)` (`zoo benchmark NAME --help`), `BENCHMARKS` the one list of them. How they measure and
report: `harness`; what each measured: docs/benchmarks.md.
"""

import importlib

# `zoo benchmark NAME` -> its module in this package
BENCHMARKS = {
    "adaptive-softmax": "adaptive_softmax",
    "fairseq": "fairseq",
    "generate": "generate",
    "head-blocks": "head_blocks",
    "input": "input_pipeline",
    "int8": "int8",
    "moe": "moe",
    "moe-cost": "moe_cost",
    "moe-parallel": "moe_parallel",
    "moe-ptb": "moe_ptb",
    "optimizer-memory": "optimizer_memory",
    "ptb-softmax": "ptb_softmax",
    "raw-text": "raw_text",
    "score": "score",
    "served-generate": "served_generate",
    "serving": "serving",
    "serving-memory": "serving_memory",
    "serving-threads": "serving_threads",
    "warmup": "warmup",
}


def names():
    return sorted(BENCHMARKS)


def module(name):
    """The module of benchmark `name` (or its module name, with underscores), or a ValueError
    naming the known ones."""
    name = {m: n for n, m in BENCHMARKS.items()}.get(name, name)
    if name not in BENCHMARKS:
        raise ValueError(f"Unknown benchmark {name!r}; known benchmarks: {', '.join(names())}.")
    return importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")


def run(name, argv=()):
    """Runs the benchmark `name` with its command-line arguments `argv`."""
    return module(name).main(list(argv))
