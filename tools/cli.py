"""The `zoo` command line: presets, train, evaluate, export, score, generate, benchmark, reproduce."""

import argparse
import json
import os
import re
import sys


def _load(directory):
    """A preset directory's model, or a preset's trained weights (`zoo score gcnn-ptb "..."`)."""
    import zoo
    from zoo.weights import TRAINED

    if os.path.isdir(directory):
        return zoo.load(directory)
    if directory in TRAINED:
        return zoo.load(directory, weights="trained")
    raise ValueError(f"The preset directory {directory!r} does not exist; give a preset directory or a preset "
                     f"with trained weights ({', '.join(sorted(TRAINED)) or 'none ship yet'}).")


def cmd_presets(args):
    from zoo import registry
    from zoo.weights import TRAINED

    for name, preset in registry.PRESETS.items():
        line = f"{name:14s}"
        if args.params:
            line += f" {registry.count_params(name):>13,d}"
        trained = " Trained weights ship: zoo.load(name, weights=\"trained\")." if name in TRAINED else ""
        print(f"{line}  {preset.description}{trained}", flush=True)


def _overrides(pairs):
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--set takes KEY=VALUE (VALUE as JSON), got {pair!r}.")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cmd_train(args):
    from zoo.training import TrainConfig, train

    config = TrainConfig(
        global_batch_size=args.global_batch_size, seq_len=args.seq_len, steps=args.steps,
        epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, max_minutes=args.max_minutes,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
        mixed_precision=args.mixed_precision, seed=args.seed, log_every=args.log_every,
        min_count=args.min_count, max_vocabulary=args.max_vocabulary, tokenizer=args.tokenizer,
        vocabulary_size=args.vocabulary_size, expert_parallel=args.expert_parallel,
        capacity_factor=args.capacity_factor,
    )
    model, history = train(args.preset, data=args.data, out_dir=args.out, strategy=args.strategy,
                           config=config, overrides=_overrides(args.set))
    best = min((h for h in history if "val_perplexity" in h), key=lambda h: h["val_perplexity"], default=None)
    print(f"Best model: {os.path.join(args.out, 'best')} (epoch {best['epoch'] if best else '?'})")
    if best:
        print(f"validation perplexity (stream): {best['val_perplexity']:.2f}")
        if "val_perplexity_per_word" in best:
            print(f"validation perplexity per word (stream): {best['val_perplexity_per_word']:.2f}")


def cmd_evaluate(args):
    from zoo.data.corpus import read_lines

    model = _load(args.directory)
    lines = read_lines(args.data, args.split)
    ppl = model.perplexity(lines, mode=args.mode)
    print(f"{args.split} perplexity ({args.mode}): {ppl:.2f}")
    # words plus one </s> per line, whatever the tokenizer: comparable across tokenizers
    per_word = model.perplexity(lines, mode=args.mode, per="word")
    print(f"{args.split} perplexity per word ({args.mode}): {per_word:.2f}")


def cmd_score(args):
    model = _load(args.directory)
    tokenizer = model.require_vocabulary()
    for text in args.text:
        if not text.strip():
            raise ValueError("Cannot score an empty text; give at least one word.")
        scores = model.score([text])[0]
        if getattr(tokenizer, "kind", "word") == "subword":  # one score per word of the text
            words = tokenizer.normalize(text).split() + ["</s>"]
        else:  # one per token: a word vocabulary shows <unk> where a word is unknown
            words = [tokenizer.tokens[i] for i in tokenizer.encode(text)[1:]]
        print(f"{sum(scores):.4f}\t" + " ".join(f"{w}:{s:.3f}" for w, s in zip(words, scores)))


def cmd_generate(args):
    model = _load(args.directory)
    print(model.generate(args.prefix, max_length=args.max_length, temperature=args.temperature,
                         top_k=args.top_k, seed=args.seed))


def default_export_name(directory):
    """The name TF Serving serves a preset directory under: the directory's name or, for a training
    run's `best/`, the run's name; made a valid directory name and URL path segment
    (`/v1/models/NAME`)."""
    path = os.path.abspath(directory)
    name = os.path.basename(path)
    if name == "best":
        name = os.path.basename(os.path.dirname(path))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-") or "model"


def cmd_export(args):
    from zoo.export import export_saved_model

    model = _load(args.directory)
    if model.vocabulary is None:
        raise ValueError(f"The preset directory {args.directory!r} has no vocabulary, which the exported "
                         "model needs to tokenise text.")
    print(export_saved_model(model, args.base, args.name or default_export_name(args.directory),
                             version=args.version))


def cmd_benchmark(args):
    from zoo.tools import benchmarks

    benchmarks.run(args.name, args.rest)


def cmd_reproduce(args):
    from zoo.tools import reproduce

    reproduce.run_from_args(args)


def parser():
    p = argparse.ArgumentParser(prog="zoo", description="Gated convolutional and MoE language models.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("presets", help="list the presets")
    s.add_argument("--params", action="store_true", help="parameter count at the paper's vocabulary")
    s.set_defaults(func=cmd_presets)

    s = sub.add_parser("train", help="train a preset on a corpus")
    s.add_argument("--preset", required=True, help="a preset name or a preset directory")
    s.add_argument("--data", default="ptb", help="'ptb', or a directory of train/valid/test text files, or a text file")
    s.add_argument("--out", required=True, help="run directory (history.json, logs/, best/)")
    s.add_argument("--strategy", default="default", help="default | mirrored | multi_worker_mirrored "
                   "(the last configured by TF_CONFIG, or by Slurm)")
    s.add_argument("--global-batch-size", "--batch-size", dest="global_batch_size", type=int,
                   help="sequences per step, over all replicas together")
    s.add_argument("--seq-len", type=int, help="tokens per training window")
    s.add_argument("--steps", type=int, help="total training steps (default: epochs × steps per epoch)")
    s.add_argument("--epochs", type=int)
    s.add_argument("--steps-per-epoch", type=int, help="validate every this many steps (default: one pass)")
    s.add_argument("--max-minutes", type=float, help="stop after this many minutes of training")
    s.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: every epoch)")
    s.add_argument("--keep-checkpoints", type=int, default=3, help="how many checkpoints to keep")
    s.add_argument("--mixed-precision", action="store_true",
                   help="mixed_float16 on a GPU, mixed_bfloat16 on a CPU; softmax and loss in float32")
    s.add_argument("--log-every", type=int, help="steps between progress lines")
    s.add_argument("--tokenizer", choices=["word", "char", "subword"],
                   help="default: a learned subword vocabulary for raw text; the treebank and WikiText keep "
                   "their word vocabularies, a character preset its characters")
    s.add_argument("--vocabulary-size", type=int, help="ids of a learned subword vocabulary (default 16000)")
    s.add_argument("--min-count", type=int, default=1, help="word vocabulary: minimum word count")
    s.add_argument("--max-vocabulary", type=int, help="word vocabulary: maximum size")
    s.add_argument("--expert-parallel", action="store_true",
                   help="shard the experts of every MoE layer over the replicas (tokens moved by all-to-all)")
    s.add_argument("--capacity-factor", type=float, default=2.0,
                   help="expert parallelism: assignments per (replica, expert) per step, as a multiple of the "
                        "balanced share (default 2.0; the rest are dropped and counted)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("evaluate", help="perplexity of a preset directory on a split")
    s.add_argument("directory")
    s.add_argument("--data", default="ptb")
    s.add_argument("--split", default="test")
    s.add_argument("--mode", default="stream", choices=["stream", "sentence"])
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("score", help="per-token log-probabilities of texts")
    s.add_argument("directory")
    s.add_argument("text", nargs="+")
    s.set_defaults(func=cmd_score)

    s = sub.add_parser("generate", help="continue a prefix")
    s.add_argument("directory")
    s.add_argument("prefix")
    s.add_argument("--max-length", type=int, default=20)
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--top-k", type=int)
    s.add_argument("--seed", type=int)
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("export", help="export a preset directory as a SavedModel for TF Serving")
    s.add_argument("directory", help="a preset directory (e.g. runs/gcnn-ptb/best)")
    s.add_argument("--base", default="exports", help="TF Serving base directory")
    s.add_argument("--name", help="model name (default: the directory's name, or the run's for a run's best/)")
    s.add_argument("--version", type=int, help="version number (default: one above the highest present)")
    s.set_defaults(func=cmd_export)

    from zoo.tools import benchmarks

    s = sub.add_parser("benchmark", help="speed benchmarks (see tools/benchmarks/)")
    s.add_argument("name", help=f"one of {', '.join(benchmarks.names())} (zoo benchmark NAME --help: its flags)")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_benchmark)

    from zoo.tools import reproduce  # standard library only: TensorFlow is imported when an experiment runs

    s = sub.add_parser("reproduce", help="the papers' experiments: results/NAME.json, NAME.png, RESULTS.md "
                       "(see tools/reproduce.py)")
    reproduce.add_arguments(s)
    s.set_defaults(func=cmd_reproduce)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    return 0
