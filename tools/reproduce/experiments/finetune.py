"""finetune of `zoo reproduce`: does pretraining transfer? `gcnn-en`'s trained weights fine-tuned
with `model.fit` on a source it never saw, against the same preset trained from scratch for the
same minutes, on the held-out sources of `python -m zoo.tools.corpora english`.

For each held-out domain (default: the Python documentation and the GNU Info manuals, technical;
Shakespeare and the fortunes, prose) these units:

- `zero-shot`: the trained gcnn-en, not trained further: its per-word validation and test perplexity.
- `pretrained` (records made before the kept weights were scored): the trained gcnn-en (weights
  and tokenizer), `fit` on the domain's training split.
- `extended`: the trained gcnn-en with its tokenizer extended by up to `extend_ids` pieces of the
  domain's training split (`LanguageModel.extend_tokenizer`, `zoo train --extend-tokenizer`),
  `fit` the same way; learning the pieces is not counted in its minutes, as the scratch
  tokenizer's is not.
- `scratch`: gcnn-en with random weights and a subword tokenizer learned from the domain's
  training split (what a user without pretrained weights does), `fit` the same way.
- `scratch-shared` (records made before the extended arm's protocol): random weights with
  gcnn-en's own tokenizer, `fit` the same way: the pretrained weights' part alone.

The fine-tuned arms fit with the preset's fine-tuning optimiser (what `zoo.load(preset,
weights="trained")` gives, `zoo.registry.Preset.fine_tune_optimizer`: gcnn-en's is its pretraining
recipe at half the learning rate, chosen on the Penn Treebank by `zoo reproduce finetune-rate`),
scratch with the preset's own (records without settings["fine_tune_optimizer"]: every arm with the
preset's own). Every fit uses batch 32 × 64 tokens, the same data order (seed 0) and `minutes` of
training time (validation passes are not counted). Each run is validated every
`validate_every_seconds` and exactly when its training time crosses each of `report_minutes`
(4 and 10 by default): the figures at M minutes are those crossings, so one 10-minute run gives
both the 4- and the 10-minute figure (the learning-rate schedule is the preset's, over its own
steps, so a run stopped at 4 minutes would have passed through the same state). The validation
perplexity is per word (`perplexity(per="word")`: whitespace words plus one `</s>` per line), so
models with different tokenizers compare; each unit also records its tokenizer's pieces per
word on the validation text. At each of `report_minutes` a run also scores the test split (the
whole of it; its first `test_words` words in the records where that is set) twice: with the
weights of its lowest validation so far, which is what `zoo train` keeps as `best/` and what a
user takes away, and with its weights of that moment; the kept weights also score the split's
first `first_test_words` words, the test text of the records before the whole split was scored
(for some sources one document: Shakespeare's is As You Like It). The kept weights are chosen on
the validation text, so their test figure is not selected on itself; the target (fine-tuned at
least `TARGET` below scratch) is read on it. The corpus is `$ZOO_CORPUS_EN`, default `corpora/en`.
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
DOMAINS = ("python-docs", "gnu-info", "shakespeare", "fortunes")
ARMS = ("zero-shot", "extended", "scratch")  # "pretrained" too in the records made before the kept weights
LEGACY_ARMS = ("zero-shot", "pretrained", "scratch", "scratch-shared")  # records without settings["arms"]
EXTENDED = "extended"
EXTEND_IDS = 4_000
REPORT_MINUTES = (4.0, 10.0)
TARGET = 0.30  # the fine-tuned run's perplexity at least this much below the scratch run's
# The test text's first words, scored beside the whole split (the test text of the records made
# before the whole split was: one document of some sources, e.g. Shakespeare's As You Like It).
FIRST_TEST_WORDS = 20_000
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
    import zoo

    if repeats is not None:
        raise ValueError("finetune trains each unit once; --repeats does not apply to it.")
    minutes = 0.05 if quick else (REPORT_MINUTES[-1] if minutes is None else float(minutes))
    report = [0.02, minutes] if quick else sorted({m for m in REPORT_MINUTES if m < minutes} | {minutes})
    return {"quick": bool(quick), "corpus": None if quick else os.path.abspath(corpus_dir()),
            "domains": list(DOMAINS), "arms": list(ARMS), "preset": "gcnn-en", "minutes": minutes,
            "report_minutes": report, "validate_every_seconds": 5 if quick else 30,
            "global_batch_size": 4 if quick else 32, "seq_len": 16 if quick else 64,
            "valid_words": 400 if quick else 20_000, "test_words": 400 if quick else None,
            "first_test_words": 200 if quick else FIRST_TEST_WORDS, "seed": 0,
            "scratch_vocabulary_size": 16_000,
            "extend_ids": 40 if quick else EXTEND_IDS,
            "fine_tune_optimizer": zoo.registry.fine_tune_optimizer("gcnn-en")}


def arms(settings):
    if "arms" in settings:
        return tuple(settings["arms"])
    return LEGACY_ARMS + ((EXTENDED,) if settings.get("extend_ids") else ())


def report_minutes(settings):
    """The budgets the figures are given at: settings["report_minutes"] (older records: the one budget)."""
    return list(settings.get("report_minutes") or [settings["minutes"]])


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
    """The first lines of `lines` holding at least `words` words (all of them if fewer, or if
    `words` is None)."""
    if words is None:
        return list(lines)
    out, count = [], 0
    for line in lines:
        if count >= words:
            break
        out.append(line)
        count += len(line.split())
    return out


class TimedValidation:
    """A Keras callback: stops `fit` after `minutes` of training time and measures the per-word
    validation perplexity every `every` seconds of it and when it crosses each of `marks`
    (minutes; the last is `minutes`); a point's `minutes` lists the marks it is the crossing of
    (several when one step crossed more than one). Validation time is not counted.

    With `test` lines, it also keeps the weights of the lowest validation so far (what `zoo
    train` saves as `best/`), and at each mark's crossing scores the test lines with them
    (`kept_test_perplexity`, from the validation at `kept_step`) and with the weights of that
    moment (`test_perplexity`); their time is not counted either. With `first` lines too (the
    test text's first words), the kept weights score those as well (`kept_first_test_perplexity`)."""

    def __init__(self, lines, minutes, every, log, marks=(), test=None, first=None):
        import keras

        outer = self
        marks = sorted({float(m) for m in marks if m < minutes} | {float(minutes)})

        class Callback(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                outer.began, outer.paused, outer.next_at = time.monotonic(), 0.0, every

            def on_train_batch_end(self, batch, logs=None):
                outer.steps += 1
                trained = time.monotonic() - outer.began - outer.paused
                crossed = [m for m in marks if trained >= m * 60 and m not in outer.reached]
                if trained >= outer.next_at or crossed:
                    outer.validate(self.model, trained, marks=crossed)
                    outer.reached.update(crossed)
                    outer.next_at = trained + every
                if trained >= minutes * 60:
                    self.model.stop_training = True

        self.callback, self.lines, self.log, self.reached = Callback(), lines, log, set()
        self.curve, self.steps, self.began, self.paused, self.next_at = [], 0, 0.0, 0.0, every
        self.test, self.first, self.kept, self.kept_point = test, first, None, None

    def validate(self, model, trained, marks=()):
        start = time.monotonic()
        ppl = float(model.perplexity(self.lines, per="word"))
        point = {"step": self.steps, "seconds": round(trained, 1), "val_perplexity": ppl}
        line = f"    {trained / 60:.2f} min, step {self.steps}: validation perplexity {ppl:.2f} per word"
        if self.test is not None:
            if self.kept_point is None or ppl < self.kept_point["val_perplexity"]:
                self.kept, self.kept_point = model.get_weights(), point
            if marks:
                point["test_perplexity"] = float(model.perplexity(self.test, per="word"))
                point["kept_step"] = self.kept_point["step"]
                now = None if self.kept_point is point else model.get_weights()
                if now is None:  # kept now: the same weights, scored once
                    point["kept_test_perplexity"] = point["test_perplexity"]
                else:
                    model.set_weights(self.kept)
                    point["kept_test_perplexity"] = float(model.perplexity(self.test, per="word"))
                if self.first is self.test:  # a split no longer than its first words: scored once
                    point["kept_first_test_perplexity"] = point["kept_test_perplexity"]
                elif self.first is not None:
                    point["kept_first_test_perplexity"] = float(model.perplexity(self.first, per="word"))
                if now is not None:
                    model.set_weights(now)
                line += (f"; test {point['test_perplexity']:.2f}, with the weights kept at step "
                         f"{point['kept_step']} {point['kept_test_perplexity']:.2f}")
                if self.first is not None:
                    line += f" (its first words {point['kept_first_test_perplexity']:.2f})"
        self.paused += time.monotonic() - start
        self.curve.append(dict(point, minutes=list(marks)) if marks else point)
        self.log(line)


def at(unit, minutes):
    """A unit's curve point at `minutes` of training: where its run crossed that mark (a zero-shot
    unit's one point; an older record's last point, its only budget)."""
    curve = unit["curve"]
    if len(curve) == 1 and unit.get("arm") == "zero-shot":
        return curve[0]
    marked = [c for c in curve if minutes in c.get("minutes", ())]
    if marked:
        return marked[0]
    if not any("minutes" in c for c in curve):
        return curve[-1]
    raise KeyError(f"The {unit.get('domain')}/{unit.get('arm')} run has no validation at {minutes:g} minutes.")


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


def run_unit(key, settings, corpus, log, optimizer=None):
    """Measures unit `key` ("domain/arm") on `corpus`; `optimizer` (a spec) replaces the one the
    arm's model comes with."""
    import keras

    import zoo
    from zoo.tools.benchmarks.harness import cpu_model, load_average
    from zoo.training.extension import pieces_per_word

    domain, arm = key.split("/")
    folder = os.path.join(corpus, "heldout", domain)
    if not os.path.isdir(folder):
        raise ValueError(f"No held-out source {domain!r} in {corpus}: build it with `python -m zoo.tools.corpora "
                         f"english {corpus}` (or set $ZOO_CORPUS_EN).")
    train_lines = zoo.data.read_lines(folder, "train")
    valid = first_words(zoo.data.read_lines(folder, "valid"), settings["valid_words"])
    test = first_words(zoo.data.read_lines(folder, "test"), settings["test_words"]) if "test_words" in settings else None
    first = first_words(test, settings["first_test_words"]) if test is not None and settings.get("first_test_words") \
        else None
    if first is not None and len(first) == len(test):
        first = test  # the whole split (the GNU manuals' holds fewer words): the same figure, scored once
    keras.utils.set_random_seed(settings["seed"])
    model = model_for(arm, settings, train_lines, log)
    if optimizer is not None:
        model.optimizer_config = dict(optimizer)
    record = {"domain": domain, "arm": arm, "params": model.count_params(), "vocabulary": len(model.tokenizer),
              "optimizer": model.optimizer_config,
              "valid_lines": len(valid), "valid_words": zoo.data.corpus.scored_words(valid),
              "pieces_per_word": pieces_per_word(model.tokenizer, valid), "cpu_model": cpu_model(),
              "load_average_start": load_average()}
    if test is not None:
        record.update(test_lines=len(test), test_words=zoo.data.corpus.scored_words(test))
    if first is not None:
        record.update(first_test_lines=len(first), first_test_words=zoo.data.corpus.scored_words(first))
    if arm == "zero-shot":
        ppl = float(model.perplexity(valid, per="word"))
        point = {"step": 0, "seconds": 0.0, "val_perplexity": ppl}
        if test is not None:
            point["test_perplexity"] = point["kept_test_perplexity"] = float(model.perplexity(test, per="word"))
        if first is not None:
            point["kept_first_test_perplexity"] = point["test_perplexity"] if first is test else \
                float(model.perplexity(first, per="word"))
        log(f"    zero-shot: validation perplexity {ppl:.2f} per word"
            + (f", test {point['test_perplexity']:.2f}" if test is not None else ""))
        return dict(record, curve=[point], final_val_perplexity=ppl, steps=0, seconds=0.0)
    model.compile()
    data = zoo.data.stream_dataset(train_lines, model.tokenizer, settings["global_batch_size"],
                                   settings["seq_len"], shuffle=True, seed=settings["seed"]).repeat()
    timer = TimedValidation(valid, settings["minutes"], settings["validate_every_seconds"], log,
                            marks=report_minutes(settings), test=test, first=first)
    timer.validate(model, 0.0)
    began = time.monotonic()
    model.fit(data, epochs=1, steps_per_epoch=10**9, callbacks=[timer.callback], verbose=0, shuffle=False)
    seconds = time.monotonic() - began - timer.paused
    return dict(record, curve=timer.curve, final_val_perplexity=timer.curve[-1]["val_perplexity"], steps=timer.steps,
                seconds=round(seconds, 1), load_average_end=load_average(),
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


def best(unit, minutes):
    """A unit's lowest validation perplexity within `minutes` of training (its crossing of the
    mark included): what `zoo train` keeps as best/, where a run overfits a small domain."""
    end = at(unit, minutes)
    return min(c["val_perplexity"] for c in unit["curve"][:unit["curve"].index(end) + 1])


def at_steps(unit, steps, minutes):
    """A unit's last validation within both `minutes` (its crossing included) and `steps` training
    steps: the control of runs whose minutes held different numbers of steps (a busier or quieter
    machine)."""
    curve = unit["curve"][:unit["curve"].index(at(unit, minutes)) + 1]
    return [c for c in curve if c["step"] <= steps][-1]


def reduction_at_steps(units, domain, arm, minutes):
    """`(1 - arm / scratch, arm's point)`: `arm`'s per-word perplexity at its last validation within
    `minutes` and the steps scratch made in them, against scratch's at `minutes`."""
    scratch = at(units[f"{domain}/scratch"], minutes)
    point = at_steps(units[f"{domain}/{arm}"], scratch["step"], minutes)
    return 1 - point["val_perplexity"] / scratch["val_perplexity"], point, scratch["step"]


LABELS = {"zero-shot": "zero-shot (trained gcnn-en, no fine-tuning)",
          "pretrained": "fine-tuned from the trained gcnn-en",
          EXTENDED: "fine-tuned from the trained gcnn-en, its tokenizer extended",
          "scratch": "trained from scratch with its own tokenizer",
          "scratch-shared": "trained from scratch with gcnn-en's tokenizer"}


def reduction(units, domain, against="scratch", arm="pretrained", minutes=None):
    """1 - `arm` / `against` per-word perplexity at `minutes` (default: the last budget; 0.3 = 30% lower)."""
    pair = [units[f"{domain}/{a}"] for a in (arm, against)]
    pre, scratch = ((at(u, minutes)["val_perplexity"] if minutes is not None else u["final_val_perplexity"])
                    for u in pair)
    return 1 - pre / scratch if scratch and math.isfinite(scratch) else None


def kept_test(unit, minutes):
    """A unit's test perplexity per word with the weights of its lowest validation within
    `minutes` (what `zoo train` keeps as best/), or None in records made before it was measured."""
    return at(unit, minutes).get("kept_test_perplexity")


def kept_reduction(units, domain, arm, minutes, key="kept_test_perplexity"):
    """1 - `arm` / scratch test perplexity, each with its kept weights at `minutes` (None before it
    was measured); `key="kept_first_test_perplexity"`: on the test text's first words."""
    pre, scratch = (at(units[f"{domain}/{a}"], minutes).get(key) for a in (arm, "scratch"))
    return None if pre is None or scratch is None else 1 - pre / scratch


def test_text(settings):
    """What a record's test figures score: the whole test split, or its first words."""
    words = settings.get("test_words")
    return "the whole test split" if words is None else f"the first ~{words:,} words of the test split"


def _suffix(settings, minutes):
    """Figure ids of a record with one budget keep their old spelling; several budgets add `@Mmin`."""
    return "" if len(report_minutes(settings)) == 1 else f"@{minutes:g}min"


def _fine_tuned(settings):
    return [a for a in ("pretrained", EXTENDED) if a in arms(settings)]


def _kept_figures(units, domain, runs, fine_tuned, minutes, end, first=None):
    """The figures of the test text scored with each run's kept weights at `minutes` (the whole
    test text, or with `first` its first words), and the fine-tuned runs' reductions; none where
    a run has not measured them (older records)."""
    from zoo.tools.reproduce.curves import figure

    key, name = ("kept_test_perplexity", "kept-test") if first is None else ("kept_first_test_perplexity",
                                                                               "kept-test-first")
    where = "" if first is None else f" on the first ~{first:,} words of the test split"
    if not all(at(units[f"{domain}/{arm}"], minutes).get(key) is not None for arm in runs):
        return []
    out = []
    for arm in runs:
        point = at(units[f"{domain}/{arm}"], minutes)
        out.append(figure(f"{domain}/{arm}/{name}{end}", f"{domain}: {LABELS[arm]}, test perplexity per word{where} "
                          f"with the weights of its lowest validation within {minutes:g} min (step "
                          f"{point['kept_step']:,}: what `zoo train` keeps as best/)", point[key],
                          steps=point["kept_step"]))
        if first is None:
            out.append(figure(f"{domain}/{arm}/test{end}", f"{domain}: {LABELS[arm]}, test perplexity per word with "
                              f"its weights at {minutes:g} min", point["test_perplexity"], steps=point["step"]))
    for arm in fine_tuned:
        reduced = "reduction" if arm == "pretrained" else "reduction-extended"
        target = f" (target ≥ {TARGET:.0%})" if first is None else " (the target is read on the whole test text)"
        out.append(figure(f"{domain}/{reduced}/{name}{end}", f"{domain}: {LABELS[arm]}, test perplexity{where} below "
                          f"scratch's, each with the weights it keeps within {minutes:g} min{target}",
                          kept_reduction(units, domain, arm, minutes, key), unit="fraction"))
    return out


def figures(settings, units):
    from zoo.tools.reproduce.curves import figure

    out = []
    present = arms(settings)
    for domain in settings["domains"]:
        for arm in present:
            u = units[f"{domain}/{arm}"]
            if "pieces_per_word" in u:
                out.append(figure(f"{domain}/{arm}/pieces-per-word", f"{domain}: pieces per word of the "
                                  f"{arm} run's tokenizer ({u['vocabulary']:,} ids) on the validation text",
                                  u["pieces_per_word"], unit="pieces/word"))
        zero = units[f"{domain}/zero-shot"]
        out.append(figure(f"{domain}/zero-shot", f"{domain}: {LABELS['zero-shot']}, validation perplexity per word",
                          zero["final_val_perplexity"], steps=0))
        if "test_perplexity" in zero["curve"][0]:
            out.append(figure(f"{domain}/zero-shot/test", f"{domain}: {LABELS['zero-shot']}, test perplexity per "
                              f"word ({test_text(settings)})", zero["curve"][0]["test_perplexity"], steps=0))
        first = settings.get("first_test_words")
        if first and "kept_first_test_perplexity" in zero["curve"][0]:
            out.append(figure(f"{domain}/zero-shot/test-first", f"{domain}: {LABELS['zero-shot']}, test perplexity "
                              f"per word on the first ~{first:,} words of the test split",
                              zero["curve"][0]["kept_first_test_perplexity"], steps=0))
        for minutes in report_minutes(settings):
            end = _suffix(settings, minutes)
            for arm in present[1:]:
                point = at(units[f"{domain}/{arm}"], minutes)
                out.append(figure(f"{domain}/{arm}{end}", f"{domain}: {LABELS[arm]}"
                                  + (f" (+{settings['extend_ids']:,} ids at most)" if arm == EXTENDED else "")
                                  + f", {minutes:g} min, validation perplexity per word", point["val_perplexity"],
                                  steps=point["step"]))
            for arm in _fine_tuned(settings):
                name = "reduction" if arm == "pretrained" else "reduction-extended"
                out.append(figure(f"{domain}/{name}{end}", f"{domain}: {LABELS[arm]}, perplexity below scratch "
                                  f"after {minutes:g} min (target ≥ {TARGET:.0%})",
                                  reduction(units, domain, arm=arm, minutes=minutes), unit="fraction"))
            out += _kept_figures(units, domain, present[1:], _fine_tuned(settings), minutes, end)
            if first:
                out += _kept_figures(units, domain, present[1:], _fine_tuned(settings), minutes, end, first=first)
            if "arms" in settings:  # the best validation within the budget (not in older records)
                for arm in present[1:]:
                    out.append(figure(f"{domain}/{arm}/best{end}", f"{domain}: {LABELS[arm]}, lowest validation "
                                      f"perplexity per word within {minutes:g} min (what `zoo train` keeps as best/)",
                                      best(units[f"{domain}/{arm}"], minutes)))
                scratch = best(units[f"{domain}/scratch"], minutes)
                for arm in _fine_tuned(settings):
                    name = "reduction" if arm == "pretrained" else "reduction-extended"
                    out.append(figure(f"{domain}/{name}/best{end}", f"{domain}: {LABELS[arm]}, lowest perplexity "
                                      f"within {minutes:g} min below scratch's (target ≥ {TARGET:.0%})",
                                      1 - best(units[f"{domain}/{arm}"], minutes) / scratch, unit="fraction"))
            if "fine_tune_optimizer" in settings:  # at scratch's steps (not in older records)
                for arm in _fine_tuned(settings):
                    name = "reduction" if arm == "pretrained" else "reduction-extended"
                    r, point, steps = reduction_at_steps(units, domain, arm, minutes)
                    out.append(figure(f"{domain}/{name}/equal-steps{end}", f"{domain}: {LABELS[arm]}, at its last "
                                      f"validation within {minutes:g} min and the {steps:,} steps scratch made in "
                                      f"them (step {point['step']:,}), below scratch's perplexity", r,
                                      unit="fraction", steps=point["step"]))
            if "scratch-shared" in present:
                out.append(figure(f"{domain}/reduction-shared{end}", f"{domain}: fine-tuned perplexity below scratch "
                                  "with gcnn-en's tokenizer", reduction(units, domain, "scratch-shared",
                                                                       minutes=minutes), unit="fraction"))
    return out


def extras(settings, units):
    notes = []
    present = arms(settings)
    for domain in settings["domains"]:
        u = {a: units[f"{domain}/{a}"] for a in present}
        parts = [f"zero-shot {u['zero-shot']['final_val_perplexity']:.1f}"]
        for minutes in report_minutes(settings):
            scores = ", ".join(f"{arm} {at(u[arm], minutes)['val_perplexity']:.1f} ({at(u[arm], minutes)['step']} "
                               "steps)" for arm in present[1:])
            verdicts = []
            for arm in _fine_tuned(settings):
                r = reduction(units, domain, arm=arm, minutes=minutes)
                verdicts.append(f"{arm} " + ("n/a" if r is None else (f"{r:.1%} lower" if r >= 0 else
                                f"{-r:.1%} higher") + f" than scratch ({'meets' if r >= TARGET else 'misses'} "
                                f"the {TARGET:.0%} target)"))
                if "fine_tune_optimizer" in settings:
                    r, point, steps = reduction_at_steps(units, domain, arm, minutes)
                    verdicts[-1] += f", {r:.1%} at step {point['step']} (within scratch's {steps} steps)"
            parts.append(f"after {minutes:g} minutes: {scores}; " + "; ".join(verdicts))
            if all(kept_test(u[arm], minutes) is not None for arm in present[1:]):
                kept = ", ".join(f"{arm} {kept_test(u[arm], minutes):.1f} (kept at step {at(u[arm], minutes)['kept_step']})"
                                 for arm in present[1:])
                verdicts = []
                for arm in _fine_tuned(settings):
                    r = kept_reduction(units, domain, arm, minutes)
                    verdicts.append(f"{arm} " + (f"{r:.1%} lower" if r >= 0 else f"{-r:.1%} higher")
                                    + f" than scratch ({'meets' if r >= TARGET else 'misses'} the {TARGET:.0%} target)")
                first = "kept_first_test_perplexity"
                if all(first in at(u[arm], minutes) for arm in present):
                    verdicts.append(f"on its first ~{settings['first_test_words']:,} words " + ", ".join(
                        f"{arm} {at(u[arm], minutes)[first]:.1f}" for arm in present) + ", " + ", ".join(
                        f"{arm} {kept_reduction(units, domain, arm, minutes, first):.1%} below scratch"
                        for arm in _fine_tuned(settings)))
                parts.append(f"on the test text with the weights kept within {minutes:g} minutes (zero-shot "
                             f"{u['zero-shot']['curve'][0]['test_perplexity']:.1f}): {kept}; " + "; ".join(verdicts))
        if all("pieces_per_word" in u[a] for a in present):
            parts.append("pieces per word: " + ", ".join(f"{a} {u[a]['pieces_per_word']:.3f}" for a in present
                                                         if a != "zero-shot"))
        notes.append(f"{domain} (per word): " + "; ".join(parts) + ".")
    notes.append("Validation: the first ~{:,} words of each held-out source's valid split; training time excludes "
                 "the validation passes; the scratch run's tokenizer is learned from the domain's training split "
                 "and the extended run's pieces from the same split (neither's time counted).".format(
                     settings["valid_words"]))
    if "test_words" in settings:
        notes.append(f"Test: {test_text(settings)} of each held-out source, scored at each budget with "
                     "the weights of the run's lowest validation so far (what `zoo train` keeps as best/; chosen on "
                     "the validation text, so the test figure is not selected on itself) and with the weights of "
                     "that moment; the target is read on the kept weights."
                     + (f" The kept weights also score the split's first ~{settings['first_test_words']:,} words "
                        "(the test text of the records before the whole split was scored)."
                        if settings.get("first_test_words") else ""))
    if settings.get("fine_tune_optimizer"):
        spec = settings["fine_tune_optimizer"]
        notes.append(f"The fine-tuned arms fit with {settings['preset']}'s fine-tuning optimizer ({spec['name']} at "
                     f"{spec['learning_rate']:g}, zoo reproduce finetune-rate), scratch with the preset's own; "
                     "each unit records its optimizer spec.")
    cpus = sorted({u["cpu_model"] for u in units.values() if u.get("cpu_model")})
    if len(cpus) > 1:
        notes.append("The units were measured on more than one CPU (" + "; ".join(cpus) + "); each domain's runs "
                     "compare only with each other if they share one.")
    return {"notes": notes}


COLOURS = {"pretrained": "#1f77b4", EXTENDED: "#9467bd", "scratch": "#d62728", "scratch-shared": "#2ca02c"}


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings, units = result["settings"], result["units"]
    domains = settings["domains"]
    fig, axes = plt.subplots(1, len(domains), figsize=(5.5 * len(domains), 6.4))
    axes = list(axes) if len(domains) > 1 else [axes]
    marks = report_minutes(settings)
    for ax, domain in zip(axes, domains):
        for arm in arms(settings)[1:]:
            u = units[f"{domain}/{arm}"]
            ppw = f", {u['pieces_per_word']:.2f} pieces/word" if "pieces_per_word" in u else ""
            ax.plot([c["seconds"] / 60 for c in u["curve"]], [c["val_perplexity"] for c in u["curve"]], marker="o",
                    markersize=2, color=COLOURS[arm],
                    label=f"{LABELS[arm]}: {at(u, marks[-1])['val_perplexity']:.1f}{ppw}")
            kept = [(m, kept_test(u, m)) for m in marks if kept_test(u, m) is not None]
            if kept:  # the test perplexity of the weights kept at each budget
                ax.plot([m for m, _ in kept], [k for _, k in kept], linestyle="none", marker="*", markersize=9,
                        color=COLOURS[arm], markeredgecolor="black", markeredgewidth=0.5,
                        label=f"  test, weights kept: " + ", ".join(f"{k:.1f}" for _, k in kept))
        zero = units[f"{domain}/zero-shot"]["final_val_perplexity"]
        ax.axhline(zero, linestyle="--", color="black", linewidth=1, label=f"zero-shot: {zero:.1f}")
        for minutes in marks[:-1]:
            ax.axvline(minutes, linestyle=":", color="grey", linewidth=1)
        tested = all(kept_test(units[f"{domain}/{a}"], m) is not None for a in arms(settings)[1:] for m in marks)
        measure = (lambda a, m: kept_reduction(units, domain, a, m)) if tested else \
            (lambda a, m: reduction(units, domain, arm=a, minutes=m))
        best = [(measure(a, m), m) for a in _fine_tuned(settings)[-1:] for m in marks]
        ax.set_title(f"{domain}:\n" + ", ".join((f"{r:.0%} below" if r >= 0 else f"{-r:.0%} above")
                                               + f" scratch at {m:g} min" for r, m in best if r is not None)
                     + (" (test, kept weights)" if tested else ""), fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("training time [minutes, validation excluded]")
        ax.set_ylabel("perplexity per word (lines: validation; stars: test)" if tested else "validation perplexity per word")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16))  # under the panel, off the curves
    fig.suptitle("gcnn-en: model.fit from the trained weights vs from scratch, same minutes"
                 + (" (--quick smoke test)" if result["quick"] else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
