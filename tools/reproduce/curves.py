"""What the training-curve experiments of `zoo reproduce` share (figure3, figure5, figure6,
ptb-sentence and table7 in `experiments/`): several training runs on the Penn Treebank, their
validation perplexity against time and against updates.

Each variant is one unit: a `zoo.training.train` run of its preset and config overrides, with the
same data, the same data order (one seed) and the same batch, validated every `validate_every`
steps, stopped after `minutes` of wall-clock time or a planned number of passes (`--quick`: a few
steps of a tiny model). The curve is the run's history: for every validation the step, the
seconds since training began (validation passes included: every run validates at the same
interval of steps) and the validation perplexity. A variant whose loss becomes NaN or infinite is
recorded as diverged at that step, with its curve up to the last validation. The runs go one
after the other, in the order of `units()`; a unit that was interrupted is trained again from its
start (its budget would otherwise restart in the middle), the finished ones are kept (the harness
resumes).
"""

import json
import math
import os
import shutil
import tempfile
import time

from zoo.tools.reproduce.curve_plot import plot_curves, variant_train

QUICK_LINES = {"train": 300, "valid": 40, "test": 40}  # the treebank's first lines, for --quick runs
QUICK_MODEL = {"embedding_dim": 16}  # the tiny model of a --quick run (with the experiment's own blocks)


def quick_corpus(root):
    """The first lines of the treebank's splits as a small corpus in `root/data` (its file names
    keep the treebank's word-vocabulary protocol); a --quick run trains on it in seconds."""
    from zoo.data.corpus import read_lines

    path = os.path.join(root, "data")
    os.makedirs(path, exist_ok=True)
    for split, n in QUICK_LINES.items():
        with open(os.path.join(path, f"ptb.{split}.txt"), "w") as f:
            f.write("\n".join(read_lines("ptb", split)[:n]) + "\n")
    return path


def runs_dir(name, quick):
    """Where the training runs of `name` live: `$ZOO_REPRODUCE_RUNS/NAME` (default
    `runs/reproduce/NAME`); a --quick run uses a temporary folder, removed afterwards."""
    if quick:
        return tempfile.mkdtemp(prefix=f"zoo-reproduce-{name}-")
    return os.path.join(os.environ.get("ZOO_REPRODUCE_RUNS", os.path.join("runs", "reproduce")), name)


class _Progress:
    """A `zoo.training.Callback` recording the model's parameter count, the last step and when it
    ended (the step a loss became NaN is the one after)."""

    def __init__(self):
        self.step = 0
        self.began = time.monotonic()
        self.seconds = 0.0
        self.params = None

    def as_callback(self):
        from zoo.training import Callback

        def on_train_begin(trainer):
            self.began = time.monotonic()
            self.params = trainer.model.count_params()

        def on_step_end(step, loss):
            self.step, self.seconds = step, time.monotonic() - self.began

        return Callback(on_train_begin=on_train_begin, on_step_end=on_step_end)


BALANCE_METRICS = ("_cv_importance", "_cv_load", "_max_load_ratio", "_dropped")
_PASSES = {}


def batches_per_pass(settings, variant=None):
    """Global batches in one pass over the training split (an epoch), as `zoo.training` cuts it."""
    t = variant_train(settings, variant or {})
    key = (settings["data"], t["global_batch_size"], t["seq_len"], t.get("tokenizer"), t.get("max_vocabulary"))
    if key not in _PASSES:
        from zoo.training.data import TrainingWindows, load_corpus

        lines, _, vocabulary = load_corpus(settings["data"], max_vocabulary=t.get("max_vocabulary"),
                                           tokenizer_kind=t.get("tokenizer"), log=lambda *a: None)
        _PASSES[key] = TrainingWindows.from_lines(lines, vocabulary, t["seq_len"], t["global_batch_size"],
                                                  t["seed"]).batches_per_pass
    return _PASSES[key]


def device():
    """What trained: the GPU(s) TensorFlow sees, else the CPU cores."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return f"{len(gpus)} GPU" if gpus else f"CPU ({os.cpu_count()} cores)"


def train_curve(name, key, variant, settings, run_dir, log):
    """Trains one variant into `run_dir` (emptied first); returns its unit record."""
    from zoo.training import TrainConfig, train

    shutil.rmtree(run_dir, ignore_errors=True)
    t = variant_train(settings, variant)
    steps = planned_steps(settings, variant)
    config = TrainConfig(global_batch_size=t["global_batch_size"], seq_len=t["seq_len"],
                         steps_per_epoch=t["validate_every"], seed=t["seed"],
                         max_minutes=None if settings["quick"] or steps else variant["minutes"],
                         steps=steps, keep_checkpoints=1, tokenizer=t.get("tokenizer"),
                         max_vocabulary=t.get("max_vocabulary"))
    overrides, anneal = _annealed(name, key, variant, steps)
    progress = _Progress()
    lines = []

    def unit_log(line):
        lines.append(line)
        log(f"  [{name} {key}] {line}")

    log(f"{name}: training {key} ({variant['label']}): preset {variant['preset']}, overrides "
        f"{json.dumps(overrides, sort_keys=True)}, "
        + (f"{steps} steps" if steps else f"{variant['minutes']:g} minutes"))
    diverged = None
    try:
        train(variant["preset"], data=settings["data"], out_dir=run_dir, config=config,
              overrides=overrides, log=unit_log,
              callbacks=[progress.as_callback()])
    except FloatingPointError as error:
        diverged = {"step": progress.step + 1, "seconds": round(progress.seconds, 1), "message": str(error)}
        log(f"  [{name} {key}] diverged: {error}")
    record = _record(variant, settings, run_dir, progress, steps, diverged)
    return dict(record, log_tail=lines[-3:], **({"anneal": anneal} if anneal else {}))


def planned_steps(settings, variant):
    """The steps a variant trains: a --quick run's few, a number of passes', or None (a budget in minutes)."""
    if settings["quick"]:
        return settings["train"]["steps"]
    if variant.get("epochs"):
        return round(variant["epochs"] * batches_per_pass(settings, variant))
    return None


def _annealed(name, key, variant, steps):
    """The variant's overrides with the preset's optimiser, its rate on a cosine over the planned
    steps when the variant anneals; and what the annealing does (None when it does not)."""
    overrides = variant["overrides"]
    if variant.get("anneal") is None:
        return overrides, None
    if not steps:
        raise ValueError(f"{name} {key}: annealing needs a planned number of steps (epochs), not a budget in minutes.")
    from zoo.optimizers import from_config, learning_rate_at
    from zoo.registry import get_preset

    optimizer = dict(overrides.get("optimizer") or get_preset(variant["preset"]).config["optimizer"],
                     decay_steps=steps, final_fraction=variant["anneal"])
    anneal = {"initial_learning_rate": optimizer["learning_rate"], "final_fraction": variant["anneal"],
              "over": f"{steps} steps", "last_learning_rate": learning_rate_at(from_config(optimizer), steps)}
    return dict(overrides, optimizer=optimizer), anneal


def _record(variant, settings, run_dir, progress, steps, diverged):
    """A trained variant's unit: its curve read from the run's history.json, and how it went."""
    t = variant_train(settings, variant)
    history = []
    path = os.path.join(run_dir, "history.json")
    if os.path.exists(path):
        with open(path) as f:
            history = json.load(f)
    curve = [{"step": h["step"], "seconds": h["seconds"], "val_perplexity": h["val_perplexity"],
              "train_perplexity": h.get("perplexity"),
              **({"unknown_share": h["val_unknown_share"]} if h.get("val_unknown_share") is not None else {}),
              **{k: v for k, v in h.items() if k.endswith(BALANCE_METRICS)}} for h in history]
    finite = [c["val_perplexity"] for c in curve if math.isfinite(c["val_perplexity"])]
    return {
        "label": variant["label"],
        "params": progress.params,
        "planned_steps": steps,
        "device": device(),
        "curve": curve,
        "steps": progress.step,
        "seconds": round(progress.seconds, 1),
        "tokens_per_second": (progress.step * t["global_batch_size"] * t["seq_len"] / progress.seconds
                              if progress.seconds else None),
        "best_val_perplexity": min(finite) if finite else None,
        "final_val_perplexity": curve[-1]["val_perplexity"] if curve and not diverged else None,
        "diverged": diverged,
        "run_dir": run_dir,
    }


def _base_settings(quick, variants, minutes, validate_every=100):
    return {
        "quick": bool(quick),
        "data": "ptb",  # --quick: the first QUICK_LINES lines of each split
        "train": {"global_batch_size": 4 if quick else 32, "seq_len": 16 if quick else 64, "seed": 0,
                  "validate_every": 4 if quick else validate_every, "steps": 4 if quick else None},
        "minutes": minutes,
        "variants": variants,
    }


def figure(id, label, ours, paper=None, unit="ppl", **extra):
    return {"id": id, "label": label, "unit": unit, "ours": ours, "ours_hardware": None, "paper": paper,
            "paper_hardware": None, **extra}


class CurvesExperiment:
    """An experiment of `zoo reproduce` made of training runs (see the module's docstring).

    `variants(quick)` gives `{key: {"label", "preset", "overrides", "minutes"}}` in training order."""

    def __init__(self, name, description, paper, variants, minutes, notes=(), paper_lines=(), ordering=None,
                 validate_every=100):
        self.NAME, self.DESCRIPTION, self.PAPER = name, description, paper
        self._variants, self._minutes, self._notes = variants, minutes, list(notes)
        self._paper_lines, self._ordering, self._validate_every = list(paper_lines), ordering, validate_every

    @property
    def TIMED_BY_MINUTES(self):  # noqa: N802 (an experiment's attribute, like NAME)
        return self._minutes is not None

    def settings(self, quick=False, repeats=None, minutes=None):
        if repeats is not None:
            raise ValueError(f"{self.NAME} trains each variant once; --repeats does not apply to it.")
        variants = self._variants(quick)
        if minutes is not None:  # every budget scaled alike (a sweep keeps its share)
            scale = minutes / self._minutes
            variants = {k: dict(v, minutes=round(v["minutes"] * scale, 3)) for k, v in variants.items()}
        return _base_settings(quick, variants, minutes or self._minutes, self._validate_every)

    def units(self, settings):
        return list(settings["variants"])

    def resolve(self, key, variant, done):
        """The variant as trained, given the units already `done` (fixed variants: itself)."""
        return variant

    def run(self, settings, pending, save, log, done=None):
        done = dict(done or {})
        root = runs_dir(self.NAME, settings["quick"])
        if settings["quick"]:
            settings = dict(settings, data=quick_corpus(root))
        try:
            for key in settings["variants"]:
                if key not in pending:
                    continue
                variant = self.resolve(key, settings["variants"][key], done)
                record = train_curve(self.NAME, key, variant, settings, os.path.join(root, key), log)
                record.update(self.after(key, variant, record, settings, log))
                record["overrides"] = variant["overrides"]
                if settings["quick"]:
                    record["run_dir"] = None
                done[key] = record
                save(key, record)
        finally:
            if settings["quick"]:
                shutil.rmtree(root, ignore_errors=True)

    def after(self, key, variant, record, settings, log):
        """More figures of a finished unit (none by default)."""
        return {}

    def ordered(self, settings, units):
        """Variant keys from the lowest final validation perplexity to the highest (diverged last)."""
        def value(key):
            u = units[key]
            return u["final_val_perplexity"] if u.get("final_val_perplexity") is not None else math.inf
        return sorted(settings["variants"], key=value)

    def figures(self, settings, units):
        out = []
        for key in settings["variants"]:
            u = units[key]
            out.append(figure(f"val/{key}", f"{u['label']}: validation perplexity after "
                              + (_budget(settings["variants"][key]) if not settings["quick"] else "the quick run")
                              + (f" (diverged at step {u['diverged']['step']})" if u.get("diverged") else ""),
                              u.get("final_val_perplexity"), steps=u["steps"], params=u["params"],
                              tokens_per_second=u["tokens_per_second"]))
        return out

    def extras(self, settings, units):
        order = self.ordered(settings, units)
        labels = [units[k]["label"] for k in order]
        notes = list(self._notes)
        notes.append("Measured ordering, lowest validation perplexity first: " + " < ".join(
            f"{units[k]['label']} ({_ppl(units[k].get('final_val_perplexity'))})" for k in order) + ".")
        if self._ordering:
            notes.append(self._ordering(units, order))
        t = settings["train"]
        notes.append(f"Each run: batch {t['global_batch_size']} × {t['seq_len']} tokens, data order seed {t['seed']}, "
                     f"validated every {t['validate_every']} steps; curves in {self.NAME}.json's units.")
        return {"ordering": order, "ordering_labels": labels, "notes": notes}

    def plot(self, result, path):
        plot_curves(result, path, f"{self.PAPER}: validation perplexity on the Penn Treebank",
                    paper_lines=self._paper_lines)


def _budget(variant):
    """A variant's training budget in words: its minutes, or its passes over the training text."""
    if variant.get("minutes") is not None:
        return f"{variant['minutes']:g} min"
    return f"{variant['epochs']:g} passes"


def _ppl(x):
    return "diverged" if x is None else f"{x:.1f}"
