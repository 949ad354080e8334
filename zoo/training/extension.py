"""`train(..., config=TrainConfig(extend_tokenizer=N))` (`zoo train --extend-tokenizer N`): the
trained model to fine-tune, its tokenizer extended from the training text before the first step
(`zoo.models.extend`), written as the preset directory `OUT/extended/` that the run then starts
from. The trained model's own files are only read.

A run started again with the same arguments reuses `OUT/extended/` (SentencePiece's training is
not repeated, so its checkpoints keep matching); the same `OUT` with another starting point or N
is refused."""

import dataclasses
import json
import os

from zoo import preset_directory
from zoo.files import write_json
from zoo.models.extend import check_tokenizer, extend_tokenizer
from zoo.training.preset import load_model, resolve_preset

DIRECTORY = "extended"
RECORD = "extension.json"
SAMPLE_LINES = 20_000  # lines of the training text the pieces per word are counted on


def check_start(preset, weights, info, extend):
    """Refuses, before any data is read, a starting point whose tokenizer cannot be extended."""
    if weights in (None, "random") and not os.path.isdir(str(preset)):
        raise ValueError(
            f"--extend-tokenizer {extend} extends a trained model's tokenizer: add --weights trained (gcnn-en) or "
            "give a preset directory; a model trained from scratch learns its own tokenizer from the text.")
    check_tokenizer(info.tokenizer, "The starting model")


def pieces_per_word(tokenizer, lines):
    sample = lines[:SAMPLE_LINES]
    words = sum(len(line.split()) for line in tokenizer.normalize_batch(sample))
    pieces = sum(len(ids) for ids in tokenizer.encode_batch(sample, add_bos=False, add_eos=False))
    return pieces / max(words, 1)


def extended_start(preset, info, weights_file, lines, extend, out_dir, log):
    """`(preset, info, tokenizer, weights_file)` to train from: `OUT/extended/` and its extended
    tokenizer, or the starting point as it was when the text yields no new piece."""
    target = os.path.join(out_dir, DIRECTORY)
    request = {"start": os.path.abspath(preset) if os.path.isdir(str(preset)) else preset,
               "weights": weights_file, "extend_tokenizer": int(extend)}
    record_path = os.path.join(target, RECORD)
    if os.path.exists(record_path):
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
        if record.get("request") != request:
            raise ValueError(f"{out_dir} was started from {_described(record.get('request'))} and holds its extended "
                             f"model; give a new --out to start from {_described(request)}.")
        log(f"Starting from {target}, the tokenizer extended when this run began "
            f"({_count(record['added'], 'id')} added).")
        return _start(target, info)
    model = load_model(preset, vocabulary_size=len(info.tokenizer))
    model.tokenizer = info.tokenizer
    if weights_file is not None:
        preset_directory.load_weights(model, weights_file)
    log(f"Extending the tokenizer ({len(info.tokenizer):,} ids) by up to {_count(int(extend), 'piece')} of the "
        "training text…")
    new, replaced = extend_tokenizer(model, lines, extend, log=log)
    if not replaced:
        return preset, info, info.tokenizer, weights_file
    before, after = pieces_per_word(info.tokenizer, lines), pieces_per_word(new.tokenizer, lines)
    log(f"Pieces per word of the training text: {before:.2f} before, {after:.2f} with the "
        f"{_count(len(replaced), 'new id')}.")
    new.save_to_preset(target)
    record = {"request": request, "added": len(replaced), "vocabulary_size": len(new.tokenizer),
              "pieces_per_word": {"before": round(before, 4), "after": round(after, 4)},
              "first_added": new.tokenizer.token_texts(range(len(info.tokenizer), len(info.tokenizer)
                                                              + min(20, len(replaced))))}
    write_json(record_path, record, ensure_ascii=False)
    return _start(target, info)


def _count(n, noun):
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _described(request):
    """A run's starting point in words: the preset or directory, the weights file if any, and N."""
    if not isinstance(request, dict):
        return repr(request)
    weights = f" (weights {request['weights']})" if request.get("weights") else ""
    n = request.get("extend_tokenizer")
    extend = f" with --extend-tokenizer {n}" if isinstance(n, int) else ""
    return f"{request.get('start')}{weights}{extend}"


def _start(target, info):
    """`extended_start`'s answer for the preset directory `target` (its tokenizer is the extended one)."""
    extended = resolve_preset(target)
    return target, dataclasses.replace(extended, train_defaults=info.train_defaults), extended.tokenizer, None
