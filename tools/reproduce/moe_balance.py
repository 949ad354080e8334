"""The balance of a trained mixture of experts, measured on the batches it was trained on:

    python -m zoo.tools.reproduce.moe_balance runs/gcnn-moe-en/best --data corpora/en \\
        --start 2900 --batches 48 --window 12 --out results/moe-balance.json

The model (a preset directory: a run's `best/` or `final/`, or a shipped preset) is run in
training mode (the gate's noise drawn, as in training) on the training batches of steps
[start, start + batches) of a `zoo train` run on `--data` with the model's own tokenizer, the
run's batch shape and `--seed` (each step's batch is a pure function of the step,
`zoo.training.data.TrainingWindows`), and every `SparseMoE` layer records its routing
(`SparseMoE.routing_recorded`). Printed and written: `zoo.layers.moe_statistics.summarize` per
layer — tokens per expert per step and over the batches, Table 6's CV(Importance), CV(Load) and
max/mean load per batch and over windows of `--window` batches, each beside the uniform floor at
the same tokens a batch, and the router's entropy.
"""

import argparse
import contextlib
import json
import sys

from zoo.files import write_json
from zoo.tools.benchmarks.harness import machine
from zoo.tools.reproduce.record import git_state, now


def measure(preset_dir, data, start, batches, window, seed=0, batch_size=32, seq_len=64, log=print):
    """`{layer name: summary}` (see the module docstring)."""
    import keras
    import tensorflow as tf

    import zoo
    from zoo.layers import SparseMoE, moe_statistics
    from zoo.training.data import TrainingWindows, load_corpus

    keras.utils.set_random_seed(seed)  # the gate's noise draws, so that a measurement repeats exactly
    model = zoo.load(preset_dir)
    # a GCNN's mixtures (moe_layers) or a stack's (its layers)
    layers = [layer for layer in getattr(model, "moe_layers", None) or getattr(model, "stack", [])
              if isinstance(layer, SparseMoE)]
    if not layers:
        raise ValueError(f"{preset_dir} holds no mixture-of-experts layer to measure.")
    train_lines, _, tokenizer = load_corpus(data, model.tokenizer, log=log)
    windows = TrainingWindows.from_lines(train_lines, tokenizer, seq_len, batch_size, seed)
    dataset = windows.dataset(start, tf.distribute.InputContext()).take(batches)
    records = {}
    with contextlib.ExitStack() as stack:
        recorded = [stack.enter_context(layer.routing_recorded()) for layer in layers]
        for inputs, _, _ in dataset:
            model(inputs, training=True)
    for layer, layer_records in zip(layers, recorded):
        k = layer.k_primary * (layer.k_secondary or 1)
        records[layer.name] = moe_statistics.summarize(layer_records, k, window)
    return records


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m zoo.tools.reproduce.moe_balance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", help="a preset directory holding a mixture of experts (a run's best/ or final/)")
    parser.add_argument("--data", required=True, help="the corpus the run was trained on")
    parser.add_argument("--start", type=int, default=0, help="the first training step whose batch is measured")
    parser.add_argument("--batches", type=int, default=48)
    parser.add_argument("--window", type=int, default=12, help="batches summed for the windowed statistics")
    parser.add_argument("--seed", type=int, default=0, help="the run's --seed (its data order)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.window < 1 or args.start < 0:
        parser.error(f"--batches and --window must be at least 1 and --start at least 0, got {args.batches}, "
                     f"{args.window} and {args.start}.")
    try:
        figures = measure(args.preset, args.data, args.start, args.batches, args.window, args.seed)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    for name, summary in figures.items():
        print(name, json.dumps({k: v for k, v in summary.items() if k != "over_the_run"}, indent=1))
    if args.out:
        write_json(args.out, {"command": "python -m zoo.tools.reproduce.moe_balance " + " ".join(sys.argv[1:] if argv is None else argv),
                              "measured": now(), "machine": machine(), "git": git_state(), "layers": figures})


if __name__ == "__main__":
    main()
