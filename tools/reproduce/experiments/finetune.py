"""finetune of `zoo reproduce`: does pretraining transfer? `gcnn-en`'s trained weights fine-tuned
with `model.fit` on a source it never saw, against the same preset trained from scratch for the
same minutes, on the held-out sources of `python -m zoo.tools.corpora english`.

For each held-out domain (default: Shakespeare, the Python documentation and the fortunes) four units:

- `zero-shot`: the trained gcnn-en, not trained further: its per-word validation perplexity.
- `pretrained`: the trained gcnn-en (weights and tokenizer), `fit` on the domain's training split.
- `scratch`: gcnn-en with random weights and a subword tokenizer learned from the domain's
  training split (what a user without pretrained weights does), `fit` the same way.
- `scratch-shared`: random weights with gcnn-en's own tokenizer, `fit` the same way: the
  pretrained weights' part alone, without the advantage of a tokenizer made for the domain.
- `extended` (when the settings name `extend_ids`): the trained gcnn-en with its tokenizer
  extended by up to `extend_ids` pieces of the domain's training split
  (`LanguageModel.extend_tokenizer`, `zoo train --extend-tokenizer`), `fit` the same way;
  learning the pieces is not counted in its minutes, as the scratch tokenizer's is not.

Both fits use the preset's own optimiser, batch 32 × 64 tokens, the same data order (seed 0) and
`minutes` of training time each (validation passes are not counted); the validation perplexity
is per word (`perplexity(per="word")`: whitespace words plus one `</s>` per line), so models with
different tokenizers compare. The corpus is `$ZOO_CORPUS_EN`, default `corpora/en`.
"""

import math
import os
import shutil
import tempfile
import time

NAME = "finetune"
DESCRIPTION = ("gcnn-en fine-tuned with model.fit on held-out sources against the same preset trained from "
               "scratch for the same minutes (per-word validation perplexity), zero-shot beside them")
PAPER = "zoo: transfer of the shipped gcnn-en (not a paper figure)"
TIMED_BY_MINUTES = True
DOMAINS = ("shakespeare", "python-docs", "fortunes")
ARMS = ("zero-shot", "pretrained", "scratch", "scratch-shared")
EXTENDED = "extended"  # an arm of the settings that name `extend_ids` (earlier records have none)
EXTEND_IDS = 4_000
TARGET = 0.30  # the pretrained run's perplexity at least this much below the scratch run's
QUICK_WORDS = ("the of and to a in that is was he for it with as his on be at by i this had not are but from or "
               "have an they which one you were her all she there would their we him been has when who will more "
               "no if out so said what up its about into than them can only other new some could time these two may "
               "then do first any my now such like our over man me even most made after also did many before must "
               "through back years where much your way well down should because each just those people how too "
               "little state good very make world still own see men work long get here between both life being under "
               "never day same another know while last might us great old year off come since against go came right "
               "used take three").split()


def corpus_dir():
    return os.environ.get("ZOO_CORPUS_EN", os.path.join("corpora", "en"))


def settings(quick=False, repeats=None, minutes=None):
    if repeats is not None:
        raise ValueError("finetune trains each unit once; --repeats does not apply to it.")
    return {"quick": bool(quick), "corpus": None if quick else os.path.abspath(corpus_dir()),
            "domains": list(DOMAINS), "preset": "gcnn-en",
            "minutes": 0.05 if quick else (5.0 if minutes is None else float(minutes)),
            "validate_every_seconds": 5 if quick else 30, "global_batch_size": 4 if quick else 32,
            "seq_len": 16 if quick else 64, "valid_words": 400 if quick else 20_000, "seed": 0,
            "scratch_vocabulary_size": 16_000, "extend_ids": 40 if quick else EXTEND_IDS}


def arms(settings):
    return ARMS + ((EXTENDED,) if settings.get("extend_ids") else ())


def units(settings):
    return [f"{domain}/{arm}" for domain in settings["domains"] for arm in arms(settings)]


def quick_corpus(root, domains):
    """A small made-up corpus shaped like `corpora/en`'s held-out sources, for --quick."""
    import random

    rng = random.Random(0)
    for domain in domains:
        folder = os.path.join(root, "heldout", domain)
        os.makedirs(folder, exist_ok=True)
        for split, n in (("train", 400), ("valid", 40), ("test", 40)):
            lines = [" ".join(rng.choice(QUICK_WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."
                     for _ in range(n)]
            with open(os.path.join(folder, f"{split}.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
    return root


def first_words(lines, words):
    """The first lines of `lines` holding at least `words` words (all of them if fewer)."""
    out, count = [], 0
    for line in lines:
        if count >= words:
            break
        out.append(line)
        count += len(line.split())
    return out


class TimedValidation:
    """A Keras callback: stops `fit` after `minutes` of training time and measures the per-word
    validation perplexity every `every` seconds of it (validation time is not counted)."""

    def __init__(self, lines, minutes, every, log):
        import keras

        outer = self

        class Callback(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                outer.began, outer.paused, outer.next_at = time.monotonic(), 0.0, every

            def on_train_batch_end(self, batch, logs=None):
                outer.steps += 1
                trained = time.monotonic() - outer.began - outer.paused
                done = trained >= minutes * 60
                if trained >= outer.next_at or done:
                    outer.validate(self.model, trained)
                    outer.next_at = trained + every
                if done:
                    self.model.stop_training = True

        self.callback, self.lines, self.log = Callback(), lines, log
        self.curve, self.steps, self.began, self.paused, self.next_at = [], 0, 0.0, 0.0, every

    def validate(self, model, trained):
        start = time.monotonic()
        ppl = float(model.perplexity(self.lines, per="word"))
        self.paused += time.monotonic() - start
        self.curve.append({"step": self.steps, "seconds": round(trained, 1), "val_perplexity": ppl})
        self.log(f"    {trained / 60:.2f} min, step {self.steps}: validation perplexity {ppl:.2f} per word")


def model_for(arm, settings, train_lines, log):
    """The arm's model: the trained preset, or random weights with a tokenizer learned from the
    domain's training lines."""
    import zoo
    from zoo.data.tokenizers import SubwordTokenizer, VocabularySizeError

    if arm in ("zero-shot", "pretrained"):
        return zoo.load(settings["preset"], weights="trained")
    if arm == EXTENDED:
        trained = zoo.load(settings["preset"], weights="trained")
        model = trained.extend_tokenizer(train_lines, settings["extend_ids"], log=lambda line: log(f"    {line}"))
        log(f"    extended: {len(model.tokenizer) - len(trained.tokenizer):,} ids added to the tokenizer")
        return model
    if arm == "scratch-shared":
        model = zoo.load(settings["preset"], weights="random")
        model.tokenizer = zoo.load(settings["preset"], weights="trained").tokenizer
        return model
    size = settings["scratch_vocabulary_size"]
    try:
        tokenizer = SubwordTokenizer.train(train_lines, vocabulary_size=size, seed=settings["seed"])
    except VocabularySizeError as e:
        tokenizer = SubwordTokenizer.train(train_lines, vocabulary_size=e.largest, seed=settings["seed"])
    log(f"    scratch: a subword tokenizer of {len(tokenizer):,} ids learned from the domain's training split")
    preset = zoo.registry.get_preset(settings["preset"])
    overrides = {"vocabulary_size": len(tokenizer)}
    cutoffs = [c for c in preset.config.get("cutoffs") or [] if c < len(tokenizer)]
    if preset.config.get("cutoffs") is not None:
        overrides["cutoffs"] = cutoffs or None
    model = zoo.load(settings["preset"], weights="random", **overrides)
    model.tokenizer = tokenizer
    return model


def run_unit(key, settings, corpus, log):
    import keras

    import zoo

    domain, arm = key.split("/")
    folder = os.path.join(corpus, "heldout", domain)
    if not os.path.isdir(folder):
        raise ValueError(f"No held-out source {domain!r} in {corpus}: build it with `python -m zoo.tools.corpora "
                         f"english {corpus}` (or set $ZOO_CORPUS_EN).")
    train_lines = zoo.data.read_lines(folder, "train")
    valid = first_words(zoo.data.read_lines(folder, "valid"), settings["valid_words"])
    keras.utils.set_random_seed(settings["seed"])
    model = model_for(arm, settings, train_lines, log)
    record = {"domain": domain, "arm": arm, "params": model.count_params(), "vocabulary": len(model.tokenizer),
              "valid_lines": len(valid), "valid_words": zoo.data.corpus.scored_words(valid)}
    if arm == "zero-shot":
        ppl = float(model.perplexity(valid, per="word"))
        log(f"    zero-shot: validation perplexity {ppl:.2f} per word")
        return dict(record, curve=[{"step": 0, "seconds": 0.0, "val_perplexity": ppl}], final_val_perplexity=ppl,
                    steps=0, seconds=0.0)
    model.compile()
    data = zoo.data.stream_dataset(train_lines, model.tokenizer, settings["global_batch_size"],
                                   settings["seq_len"], shuffle=True, seed=settings["seed"]).repeat()
    timer = TimedValidation(valid, settings["minutes"], settings["validate_every_seconds"], log)
    timer.validate(model, 0.0)
    began = time.monotonic()
    model.fit(data, epochs=1, steps_per_epoch=10**9, callbacks=[timer.callback], verbose=0, shuffle=False)
    seconds = time.monotonic() - began - timer.paused
    return dict(record, curve=timer.curve, final_val_perplexity=timer.curve[-1]["val_perplexity"], steps=timer.steps,
                seconds=round(seconds, 1),
                tokens_per_second=timer.steps * settings["global_batch_size"] * settings["seq_len"] / max(seconds, 1e-9))


def run(settings, pending, save, log, done=None):
    root = tempfile.mkdtemp(prefix="zoo-finetune-") if settings["quick"] else None
    try:
        corpus = quick_corpus(root, settings["domains"]) if settings["quick"] else settings["corpus"]
        for key in units(settings):
            if key in pending:
                log(f"finetune: {key}" + ("" if key.endswith("zero-shot") else f", {settings['minutes']:g} minutes"))
                save(key, run_unit(key, settings, corpus, log))
    finally:
        if root:
            shutil.rmtree(root, ignore_errors=True)


def reduction(units, domain, against="scratch", arm="pretrained"):
    """1 - `arm` / `against` final per-word perplexity (0.3 = 30% lower)."""
    pre, scratch = (units[f"{domain}/{a}"]["final_val_perplexity"] for a in (arm, against))
    return 1 - pre / scratch if scratch and math.isfinite(scratch) else None


def figures(settings, units):
    from zoo.tools.reproduce.curves import figure

    out = []
    minutes = f"{settings['minutes']:g} min"
    for domain in settings["domains"]:
        for arm, label in (("zero-shot", "zero-shot (trained gcnn-en, no fine-tuning)"),
                           ("pretrained", f"fine-tuned from the trained gcnn-en, {minutes}"),
                           ("scratch", f"trained from scratch with its own tokenizer, {minutes}"),
                           ("scratch-shared", f"trained from scratch with gcnn-en's tokenizer, {minutes}")):
            u = units[f"{domain}/{arm}"]
            out.append(figure(f"{domain}/{arm}", f"{domain}: {label}, validation perplexity per word",
                              u["final_val_perplexity"], steps=u["steps"]))
        out.append(figure(f"{domain}/reduction", f"{domain}: fine-tuned perplexity below scratch (target ≥ "
                          f"{TARGET:.0%})", reduction(units, domain), unit="fraction"))
        out.append(figure(f"{domain}/reduction-shared", f"{domain}: fine-tuned perplexity below scratch with "
                          "gcnn-en's tokenizer", reduction(units, domain, "scratch-shared"), unit="fraction"))
        if EXTENDED in arms(settings):
            u = units[f"{domain}/{EXTENDED}"]
            out.append(figure(f"{domain}/{EXTENDED}", f"{domain}: fine-tuned from the trained gcnn-en with "
                              f"{settings['extend_ids']:,} ids added to its tokenizer, {minutes}, validation "
                              "perplexity per word", u["final_val_perplexity"], steps=u["steps"]))
            out.append(figure(f"{domain}/reduction-extended", f"{domain}: fine-tuned with the extended tokenizer, "
                              f"perplexity below scratch (target ≥ {TARGET:.0%})",
                              reduction(units, domain, arm=EXTENDED), unit="fraction"))
    return out


def extras(settings, units):
    notes = []
    for domain in settings["domains"]:
        r = reduction(units, domain)
        u = {a: units[f"{domain}/{a}"] for a in ARMS}
        notes.append(f"{domain}: zero-shot {u['zero-shot']['final_val_perplexity']:.1f}, fine-tuned "
                     f"{u['pretrained']['final_val_perplexity']:.1f} ({u['pretrained']['steps']} steps), scratch "
                     f"{u['scratch']['final_val_perplexity']:.1f} ({u['scratch']['steps']} steps) per word after "
                     f"{settings['minutes']:g} minutes each: "
                     + ((f"{r:.1%} lower" if r >= 0 else f"{-r:.1%} higher") + " from the pretrained weights ("
                        + ("meets" if r >= TARGET else "misses") + f" the {TARGET:.0%} target)" if r is not None else "n/a")
                     + f"; scratch with gcnn-en's tokenizer {u['scratch-shared']['final_val_perplexity']:.1f}, the "
                       f"fine-tuned run {reduction(units, domain, 'scratch-shared'):.1%} below it."
                     + _extended_note(settings, units, domain))
    notes.append("Validation: the first ~{:,} words of each held-out source's valid split; training time excludes "
                 "the validation passes; the scratch run's tokenizer is learned from the domain's training split "
                 "(its time not counted).".format(settings["valid_words"]))
    return {"notes": notes}


def _extended_note(settings, units, domain):
    if EXTENDED not in arms(settings):
        return ""
    u, r = units[f"{domain}/{EXTENDED}"], reduction(units, domain, arm=EXTENDED)
    where = "n/a" if r is None else (f"{r:.1%} lower" if r >= 0 else f"{-r:.1%} higher")
    return (f" With {u['vocabulary'] - units[f'{domain}/pretrained']['vocabulary']:,} ids added to the tokenizer: "
            f"{u['final_val_perplexity']:.1f} ({u['steps']} steps), {where} than scratch"
            + ("" if r is None else f" ({'meets' if r >= TARGET else 'misses'} the {TARGET:.0%} target)") + ".")


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings, units = result["settings"], result["units"]
    fig, axes = plt.subplots(1, len(settings["domains"]), figsize=(6 * len(settings["domains"]), 4.6))
    axes = list(axes) if len(settings["domains"]) > 1 else [axes]
    for ax, domain in zip(axes, settings["domains"]):
        for arm, colour, label in (("pretrained", "#1f77b4", "fine-tuned from the trained gcnn-en"),
                                   (EXTENDED, "#9467bd", "fine-tuned, tokenizer extended"),
                                   ("scratch", "#d62728", "from scratch, its own tokenizer"),
                                   ("scratch-shared", "#2ca02c", "from scratch, gcnn-en's tokenizer")):
            if arm not in arms(settings):
                continue
            u = units[f"{domain}/{arm}"]
            ax.plot([c["seconds"] / 60 for c in u["curve"]], [c["val_perplexity"] for c in u["curve"]], marker="o",
                    markersize=3, color=colour, label=f"{label}: {u['final_val_perplexity']:.1f}")
        zero = units[f"{domain}/zero-shot"]["final_val_perplexity"]
        ax.axhline(zero, linestyle="--", color="black", linewidth=1, label=f"zero-shot: {zero:.1f}")
        r = reduction(units, domain)
        if r is not None:
            where = f"{r:.0%} below" if r >= 0 else f"{-r:.0%} above"
            ax.set_title(f"{domain}: fine-tuned {where} scratch (its own tokenizer)")
        else:
            ax.set_title(domain)
        ax.set_yscale("log")
        ax.set_xlabel("training time [minutes, validation excluded]")
        ax.set_ylabel("validation perplexity per word")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("gcnn-en: model.fit from the trained weights vs from scratch, same minutes"
                 + (" (--quick smoke test)" if result["quick"] else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
