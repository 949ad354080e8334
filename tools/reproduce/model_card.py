"""The figures of a shipped preset's model card, measured on the shipped (float16) weights:

    python -m zoo.tools.reproduce.model_card gcnn-en --run runs/gcnn-en --corpus corpora/en \\
        --ship --out results/gcnn-en.json

`--ship` first copies the run's `best/` preset into `zoo/trained_weights/PRESET/` (float16
weights, config and tokenizer: `zoo.weights.save_trained_directory`) and prints the SHA-256 for
the preset's `TRAINED` entry. Then the shipped model is loaded as users load it
(`zoo.load(PRESET, weights="trained")` after the entry is in place, else from the directory) and
scored per word (stream, `perplexity(per="word")`) on the corpus's test split, on each
training source's test split and, zero-shot, on each held-out source's test split. The run's
training figures (steps, minutes, tokens per second, validation curve) come from its
`history.json` and log; the JSON records the command, the machine and the file sizes.
"""

import argparse
import json
import os
import sys
import time

from zoo.files import write_json
from zoo.tools.benchmarks.harness import machine
from zoo.tools.reproduce.record import git_state, now, portable

# A fixed probe of the shipped weights, recorded in the JSON and checked by
# tests/trained_presets_test.py: text written for it (in no corpus), and prompts for greedy decoding.
PROBE_TEXT = [
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Members of Congress asked the Secretary how the new law would affect farmers in the West.",
    "In the beginning of the war, the army had few soldiers and fewer supplies.",
]
PROBE_PROMPTS = ["The President said that", "In the year 1800, the", "And the Lord said unto"]
PROBE_LENGTH = 24


def evaluate(model, folder, split):
    from zoo.data import read_lines
    from zoo.data.corpus import scored_words

    lines = read_lines(folder, split)
    start = time.monotonic()
    ppl = float(model.perplexity(lines, per="word"))
    tokens = sum(len(model.tokenizer.encode(line)) - 1 for line in lines)  # each line's pieces and </s>
    return {"per_word": ppl, "tokens_per_word": tokens / scored_words(lines), "lines": len(lines),
            "scored_words": scored_words(lines),
            "seconds": round(time.monotonic() - start, 1)}


def training_figures(run):
    with open(os.path.join(run, "history.json")) as f:
        history = json.load(f)
    log_path = os.path.join(os.path.dirname(run.rstrip("/")), os.path.basename(run.rstrip("/")) + ".log")
    last = history[-1]
    best = min(history, key=lambda h: h["val_perplexity"])
    return {"validations": [{k: h.get(k) for k in ("step", "seconds", "val_perplexity", "val_perplexity_per_word",
                                                    "loss")} for h in history],
            "steps": last["step"], "minutes": round(last["seconds"] / 60, 1) if "seconds" in last else None,
            "best_step": best["step"], "best_val_per_word": best.get("val_perplexity_per_word"),
            "log": portable(log_path, "runs") if os.path.exists(log_path) else None}


def command(args):
    """The command that made the card, with the run and the corpus named as a reader's checkout names them."""
    return (f"python -m zoo.tools.reproduce.model_card {args.preset} --run {portable(args.run, 'runs')} "
            f"--corpus {portable(args.corpus, 'corpora')}{' --ship' * args.ship} --out {args.out}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m zoo.tools.reproduce.model_card", description=__doc__.split("\n")[0])
    p.add_argument("preset")
    p.add_argument("--run", required=True, help="the training run directory (history.json, best/)")
    p.add_argument("--corpus", required=True, help="the corpus of `python -m zoo.tools.corpora english`")
    p.add_argument("--ship", action="store_true", help="copy the run's best/ into zoo/trained_weights/PRESET first")
    p.add_argument("--out", required=True, help="the JSON to write")
    args = p.parse_args(argv)

    import zoo
    import zoo.weights

    shipped = os.path.join(zoo.weights.PACKAGE_DIR, "trained_weights", args.preset)
    if args.ship:
        digest = zoo.weights.save_trained_directory(os.path.join(args.run, "best"), shipped)
        print(f"shipped {shipped}; its TRAINED entry: Trained(\"trained_weights/{args.preset}/model.weights.h5\", "
              f"\"{digest}\")")
    entry = zoo.weights.TRAINED.get(args.preset)
    digest = zoo.weights.file_sha256(os.path.join(shipped, "model.weights.h5"))
    if entry is not None and entry.sha256 == digest:
        model = zoo.load(args.preset, weights="trained")
    else:
        print("the TRAINED entry does not name these weights yet: loading the directory", file=sys.stderr)
        model = zoo.load(shipped)
    corpus = args.corpus
    with open(os.path.join(corpus, "corpus.json")) as f:
        manifest = json.load(f)
    figures = {"test": evaluate(model, corpus, "test")}
    for name, source in manifest["sources"].items():
        folder = os.path.join(corpus, "sources" if source["role"] == "training" else "heldout", name)
        figures[f"{name}/test"] = evaluate(model, folder, "test")
        print(f"{name} ({source['role']}): test perplexity {figures[f'{name}/test']['per_word']:.2f} per word")
    print(f"test perplexity {figures['test']['per_word']:.2f} per word")
    probe = {"text": PROBE_TEXT, "per_word": float(model.perplexity(PROBE_TEXT, mode="sentence", per="word")),
             "prompts": PROBE_PROMPTS, "max_length": PROBE_LENGTH,
             "greedy": model.generate(PROBE_PROMPTS, max_new_tokens=PROBE_LENGTH, sampler="greedy", stop=None)}
    print("greedy:", *probe["greedy"], sep="\n  ")
    sizes = {name: os.path.getsize(os.path.join(shipped, name)) for name in sorted(os.listdir(shipped))}
    write_json(args.out, {
        "preset": args.preset, "measured_at": now(), "git": git_state(), "machine": machine(),
        "command": command(args),
        "params": model.count_params(), "vocabulary": len(model.tokenizer), "sha256": digest,
        "file_bytes": sizes, "corpus": {k: manifest[k] for k in ("training_words", "total_words", "split")},
        "sources": {n: {k: s[k] for k in ("role", "kind", "package", "license", "documents", "words")}
                    for n, s in manifest["sources"].items()},
        "training": training_figures(args.run), "figures": figures, "probe": probe})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
