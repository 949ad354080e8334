"""`zoo train`: a preset trained on a corpus. Every flag whose destination is a field of
`zoo.training.TrainConfig` goes into the run's TrainConfig by that name, so a new field needs
only its flag here."""

import dataclasses
import json
import os


def add_parser(subparsers):
    s = subparsers.add_parser("train", help="train a preset on a corpus")
    s.add_argument("--preset", required=True, help="a preset name or a preset directory")
    s.add_argument("--data", default="ptb", help="'ptb', or a directory of train/valid/test text files, or a text file")
    s.add_argument("--out", required=True, help="run directory (history.json, logs/, best/)")
    s.add_argument("--weights", default="random",
                   help="random (default), trained (the weights that ship for the preset; gcnn-en brings its "
                        "tokenizer and fine-tunes at half its pretraining learning rate) or a preset directory to "
                        "fine-tune (its model and tokenizer, e.g. one written by zoo convert fairseq; the preset "
                        "name gives the training defaults)")
    s.add_argument("--strategy", default="default", help="default | mirrored | multi_worker_mirrored "
                   "(the last configured by TF_CONFIG, or by Slurm)")
    _add_config_flags(s)
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    s.set_defaults(func=run)


def _add_config_flags(s):
    """The flags of TrainConfig's fields (destinations = field names)."""
    s.add_argument("--global-batch-size", "--batch-size", dest="global_batch_size", type=int,
                   help="sequences per step, over all replicas together")
    s.add_argument("--seq-len", type=int, help="tokens per training window")
    s.add_argument("--steps", type=int, help="total training steps (default: epochs × steps per epoch)")
    s.add_argument("--epochs", type=int)
    s.add_argument("--steps-per-epoch", type=int, help="validate every this many steps (default: one pass)")
    s.add_argument("--max-minutes", type=float, help="stop after this many minutes of training")
    s.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: every epoch)")
    s.add_argument("--keep-checkpoints", type=int, help="how many checkpoints to keep (default 3)")
    s.add_argument("--mixed-precision", action="store_true",
                   help="mixed_float16 on a GPU, mixed_bfloat16 on a CPU; softmax and loss in float32")
    s.add_argument("--log-every", type=int, help="steps between progress lines")
    s.add_argument("--tokenizer", choices=["word", "char", "subword"],
                   help="default: a learned subword vocabulary for raw text; the treebank and WikiText keep "
                   "their word vocabularies, a character preset its characters")
    s.add_argument("--vocabulary-size", type=int, help="ids of a learned subword vocabulary (default 16000)")
    s.add_argument("--min-count", type=int, help="word vocabulary: minimum word count (default 1)")
    s.add_argument("--max-vocabulary", type=int, help="word vocabulary: maximum size")
    s.add_argument("--expert-parallel", action="store_true",
                   help="shard the experts of every MoE layer over the replicas (tokens moved by all-to-all)")
    s.add_argument("--capacity-factor", type=float,
                   help="expert parallelism: assignments per (replica, expert) per step, as a multiple of the "
                        "balanced share (default 2.0; the rest are dropped and counted)")
    s.add_argument("--extend-tokenizer", type=int, metavar="N",
                   help="fine-tuning a trained subword model: add up to N ids for pieces of the training text its "
                        "tokenizer lacks, their rows started from the pieces they replace (docs/fine-tuning.md)")
    s.add_argument("--seed", type=int, help="seed of the weights, the data order and the random layers (default 0)")


def train_config(args):
    """The TrainConfig of the parsed flags: every flag named like one of its fields."""
    from zoo.training import TrainConfig

    # A flag left unset (None; store_true flags give False, the fields' own defaults) leaves its
    # field at TrainConfig's default, so the defaults live in one place.
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{name: value for name, value in vars(args).items() if name in fields and value is not None})


def overrides(pairs):
    """`--set KEY=VALUE` pairs as config overrides (VALUE read as JSON, else as a string)."""
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


def run(args):
    from zoo.training import train

    from zoo.training import distribute

    model, history = train(args.preset, data=args.data, out_dir=args.out, strategy=args.strategy,
                           config=train_config(args), overrides=overrides(args.set), weights=args.weights,
                           log=lambda message: print(message, flush=True))  # the library logs; the command prints
    if not distribute.is_chief(model.distribute_strategy):  # its history is not the run's: the chief's is
        task_type, task_id = distribute.task(model.distribute_strategy)
        print(f"Done: {task_type} {task_id} of the cluster; the chief wrote {os.path.join(args.out, 'best')} and "
              "gives the run's figures.")
        return
    best = min((h for h in history if "val_perplexity" in h), key=lambda h: h["val_perplexity"], default=None)
    print(f"Best model: {os.path.join(args.out, 'best')} (epoch {best['epoch'] if best else '?'})")
    if best:
        print(f"validation perplexity (stream): {best['val_perplexity']:.2f}")
        if "val_perplexity_per_word" in best:
            share = best.get("val_unknown_share")
            unknown = f" ({100 * share:.2f}% of the words <unk>)" if share is not None else ""
            print(f"validation perplexity per word (stream): {best['val_perplexity_per_word']:.2f}{unknown}")
