"""The benchmarks behind `zoo benchmark NAME [args...]`: `BENCHMARKS` the one list of them, each a
module's `main(argv)` or, where one module holds a family of benchmarks sharing their setup, the
function its entry names (`zoo benchmark NAME --help`). How they measure and report: `harness`;
what each measured: docs/benchmarks.md.
"""

import importlib

# `zoo benchmark NAME` -> its module in this package (its `main`), or "module:function"
BENCHMARKS = {
    "adaptive-softmax": "adaptive_softmax",
    "fairseq": "fairseq",
    "generate": "generate",
    "head-blocks": "head_blocks",
    "input": "corpus:input_main",
    "int8": "int8",
    "litert": "litert",
    "moe": "moe",
    "moe-cost": "moe_cost",
    "moe-parallel": "moe_parallel",
    "moe-ptb": "ptb:moe_ptb",
    "optimizer-memory": "moe:optimizer_memory",
    "ptb-softmax": "ptb:ptb_softmax",
    "raw-text": "corpus:raw_text",
    "score": "score",
    "served-generate": "serving:served_generate",
    "serving": "serving",
    "serving-memory": "serving:serving_memory",
    "serving-threads": "serving:serving_threads",
    "warmup": "serving:warmup",
}


def names():
    return sorted(BENCHMARKS)


def module(name):
    """The module of benchmark `name` (or its module name, with underscores), or a ValueError
    naming the known ones."""
    name = {m: n for n, m in BENCHMARKS.items() if ":" not in m}.get(name, name)
    if name not in BENCHMARKS:
        raise ValueError(f"Unknown benchmark {name!r}; known benchmarks: {', '.join(names())}.")
    return importlib.import_module(f"{__name__}.{BENCHMARKS[name].partition(':')[0]}")


def entry(name):
    """The function that runs benchmark `name` with its command-line arguments."""
    return getattr(module(name), BENCHMARKS.get(name, name).partition(":")[2] or "main")


def run(name, argv=()):
    """Runs the benchmark `name` with its command-line arguments `argv`."""
    return entry(name)(list(argv))
