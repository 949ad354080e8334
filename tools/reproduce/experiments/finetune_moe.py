"""finetune-moe of `zoo reproduce`: the transfer of the shipped mixture of experts, `gcnn-moe-en`,
beside `gcnn-en`'s (`zoo reproduce finetune`).

The protocol is finetune's (tools/reproduce/experiments/finetune.py), on the same four held-out
sources, batches, data order, validation and test text, with the mixture in gcnn-en's place and
two arms:

- `zero-shot`: the trained gcnn-moe-en, not trained further (per-word validation and test).
- `extended`: its tokenizer (gcnn-en's own) extended by up to `extend_ids` pieces of the domain's
  training split, then `fit` with the preset's fine-tuning optimiser (FactorizedAdam: the experts'
  matrices factored, as in Appendix D) for `minutes` of training time.
- `gcnn-en-extended`: gcnn-en's own extended arm again, in the same run, so that the two are
  timed on one machine (a record made on another machine of the same name ran twice as many
  steps in its minutes).

The figures set each beside gcnn-en's of the same id (the fine-tuned ones from this run's
`gcnn-en-extended`, the zero-shot ones from `results/finetune.json`), say how far below (or
above) gcnn-en's the mixture lands, and compare the two at the mixture's step count too: the
mixture's training step costs more than gcnn-en's, so it makes fewer steps in the same minutes.
"""

import json
import os

from zoo.tools.reproduce.experiments import finetune as base

NAME = "finetune-moe"
DESCRIPTION = ("gcnn-moe-en (the mixture of experts) fine-tuned with model.fit on finetune's held-out sources, "
               "zero-shot beside it, each figure beside gcnn-en's in results/finetune.json")
PAPER = "zoo: transfer of the shipped gcnn-moe-en beside gcnn-en's (not a paper figure)"
TIMED_BY_MINUTES = True
PRESET = "gcnn-moe-en"
BESIDE_ARM = "gcnn-en-extended"  # gcnn-en's extended arm again, in the same run: the same machine and minutes
ARMS = ("zero-shot", base.EXTENDED, BESIDE_ARM)
BESIDE = os.path.join("results", "finetune.json")  # gcnn-en's record, read when the figures are made
LABELS = {"zero-shot": "zero-shot (trained gcnn-moe-en, no fine-tuning)",
          base.EXTENDED: "gcnn-moe-en fine-tuned, its tokenizer extended"}


def settings(quick=False, repeats=None, minutes=None):
    import zoo

    out = base.settings(quick, repeats, minutes)
    out.update(preset=PRESET, arms=list(ARMS), fine_tune_optimizer=zoo.registry.fine_tune_optimizer(PRESET))
    return out


def units(settings):
    return base.units(settings)


def run(settings, pending, save, log, done=None):
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="zoo-finetune-moe-") if settings["quick"] else None
    try:
        corpus = base.quick_corpus(root, settings["domains"]) if settings["quick"] else settings["corpus"]
        for key in units(settings):
            if key not in pending:
                continue
            domain, arm = key.split("/")
            log(f"finetune-moe: {key}" + ("" if arm == "zero-shot" else f", {settings['minutes']:g} minutes"))
            if arm == BESIDE_ARM:
                save(key, base.run_unit(f"{domain}/{base.EXTENDED}", dict(settings, preset="gcnn-en"), corpus, log))
            else:
                save(key, base.run_unit(key, settings, corpus, log))
    finally:
        if root:
            shutil.rmtree(root, ignore_errors=True)


def measured_beside(settings, units):
    """gcnn-en's figures from its extended arm measured in this run (`BESIDE_ARM`), under the ids
    of `figures`, and its curve; empty for a record without that arm."""
    out = {}
    for domain in settings["domains"]:
        unit = units.get(f"{domain}/{BESIDE_ARM}")
        if unit is None:
            continue
        out[f"{domain}/{base.EXTENDED}/curve"] = unit["curve"]
        for minutes in base.report_minutes(settings):
            point = base.at(unit, minutes)
            out[f"{domain}/{base.EXTENDED}@{minutes:g}min"] = point["val_perplexity"]
            if point.get("kept_test_perplexity") is not None:
                out[f"{domain}/{base.EXTENDED}/kept-test@{minutes:g}min"] = point["kept_test_perplexity"]
    return out


def gcnn_en_figures(path=BESIDE):
    """`{figure id: value}` of gcnn-en's finetune record, and its units' validation curves under
    `"<unit>/curve"` (empty when there is no record)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        record = json.load(f)
    out = {fig["id"]: fig["ours"] for fig in record["figures"]}
    out.update({f"{key}/curve": unit["curve"] for key, unit in record["units"].items() if "curve" in unit})
    return out


def at_step(curve, step):
    """A validation curve's perplexity at `step`, linear between the validations around it (None
    past its end)."""
    points = [(c["step"], c["val_perplexity"]) for c in curve]
    for (s0, v0), (s1, v1) in zip(points, points[1:]):
        if s0 <= step <= s1:
            return v0 + (v1 - v0) * (step - s0) / max(s1 - s0, 1)
    return None


def figures(settings, units, beside=None):
    from zoo.tools.reproduce.curves import figure

    beside = dict(gcnn_en_figures() if beside is None else beside)
    here = measured_beside(settings, units)
    beside.update(here)  # measured in this run, on this machine, wins over the record
    source = "measured beside it in this run" if here else "results/finetune.json; its steps there"
    out = []

    def add(fid, label, value, **kwargs):
        out.append(figure(fid, label, value, **kwargs))
        theirs = beside.get(fid)
        if theirs is not None and not settings["quick"]:
            where = source if fid in here else "results/finetune.json; its steps there"
            out.append(figure(f"{fid}/gcnn-en", f"{label.replace('gcnn-moe-en', 'gcnn-en')} ({where})", theirs))
            out.append(figure(f"{fid}/below-gcnn-en", f"{label}: below gcnn-en's (negative: above)",
                              1 - value / theirs, unit="fraction"))

    for domain in settings["domains"]:
        zero = units[f"{domain}/zero-shot"]
        add(f"{domain}/zero-shot", f"{domain}: {LABELS['zero-shot']}, validation perplexity per word",
            zero["final_val_perplexity"], steps=0)
        if "test_perplexity" in zero["curve"][0]:
            add(f"{domain}/zero-shot/test", f"{domain}: {LABELS['zero-shot']}, test perplexity per word "
                f"({base.test_text(settings)})", zero["curve"][0]["test_perplexity"], steps=0)
        tuned = units[f"{domain}/{base.EXTENDED}"]
        for minutes in base.report_minutes(settings):
            end = f"@{minutes:g}min"
            point = base.at(tuned, minutes)
            add(f"{domain}/{base.EXTENDED}{end}", f"{domain}: {LABELS[base.EXTENDED]}, {minutes:g} min, validation "
                "perplexity per word", point["val_perplexity"], steps=point["step"])
            if f"{domain}/{BESIDE_ARM}" in units:
                out.append(figure(f"{domain}/steps{end}", f"{domain}: steps made in {minutes:g} min, gcnn-moe-en "
                                  "against gcnn-en beside it", point["step"] / max(base.at(
                                      units[f"{domain}/{BESIDE_ARM}"], minutes)["step"], 1), unit="ratio"))
            # at equal steps: the minutes compare the machines as much as the models
            curve = beside.get(f"{domain}/{base.EXTENDED}/curve")
            theirs = None if curve is None or settings["quick"] else at_step(curve, point["step"])
            if theirs is not None:
                out.append(figure(f"{domain}/{base.EXTENDED}{end}/gcnn-en-equal-steps", f"{domain}: gcnn-en fine-tuned, "
                                  f"its tokenizer extended, validation perplexity per word at the mixture's "
                                  f"{point['step']:,} steps ({source}, between its validations)", theirs,
                                  steps=point["step"]))
                out.append(figure(f"{domain}/{base.EXTENDED}{end}/below-gcnn-en-equal-steps", f"{domain}: "
                                  f"{LABELS[base.EXTENDED]}, validation at {point['step']:,} steps below gcnn-en's at "
                                  "as many (negative: above)", 1 - point["val_perplexity"] / theirs, unit="fraction"))
            if point.get("kept_test_perplexity") is not None:
                add(f"{domain}/{base.EXTENDED}/kept-test{end}", f"{domain}: {LABELS[base.EXTENDED]}, test perplexity "
                    f"per word with the weights of its lowest validation within {minutes:g} min",
                    point["kept_test_perplexity"], steps=point["kept_step"])
    return out


def extras(settings, units):
    figs = {f["id"]: f["ours"] for f in figures(settings, units)}
    notes = []
    for domain in settings["domains"]:
        parts = []
        for fid, what in ((f"{domain}/zero-shot/test", "zero-shot test"),
                          *((f"{domain}/{base.EXTENDED}@{m:g}min", f"fine-tuned {m:g} min, validation")
                            for m in base.report_minutes(settings)),
                          *((f"{domain}/{base.EXTENDED}/kept-test@{m:g}min", f"fine-tuned {m:g} min, test")
                            for m in base.report_minutes(settings))):
            if fid in figs:
                theirs = figs.get(f"{fid}/gcnn-en")
                below = 1 - figs[fid] / theirs if theirs else None
                parts.append(f"{what} {figs[fid]:.1f}" + ("" if theirs is None else
                                                           f" (gcnn-en {theirs:.1f}: {abs(below):.1%} "
                                                           f"{'lower' if below >= 0 else 'higher'})"))
        for m in base.report_minutes(settings):
            fid = f"{domain}/{base.EXTENDED}@{m:g}min/gcnn-en-equal-steps"
            if fid in figs:
                below = figs[f"{domain}/{base.EXTENDED}@{m:g}min/below-gcnn-en-equal-steps"]
                parts.append(f"at the mixture's {units[f'{domain}/{base.EXTENDED}']['steps']:,} steps gcnn-en's "
                             f"validation was {figs[fid]:.1f} ({abs(below):.1%} {'higher' if below >= 0 else 'lower'} "
                             "than the mixture's)")
        notes.append(f"{domain} (per word): " + "; ".join(parts) + ".")
    spec = settings["fine_tune_optimizer"]
    notes.append(f"gcnn-moe-en fits with its fine-tuning optimizer ({spec['name']} at {spec['learning_rate']:g}: "
                 "the experts' matrices factored), gcnn-en with its own; gcnn-en's fine-tuned figures are its "
                 f"extended arm measured in this run ({BESIDE_ARM}, the same machine and minutes) where the record has "
                 "it, its zero-shot ones those of results/finetune.json (zoo reproduce finetune).")
    return {"notes": notes}


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings, units_ = result["settings"], result["units"]
    domains = settings["domains"]
    fig, axes = plt.subplots(1, len(domains), figsize=(4 * len(domains), 3.4), squeeze=False)
    for ax, domain in zip(axes[0], domains):
        curve = units_[f"{domain}/{base.EXTENDED}"]["curve"]
        ax.plot([c["seconds"] / 60 for c in curve], [c["val_perplexity"] for c in curve], color="#9467bd",
                label="gcnn-moe-en, extended")
        zero = units_[f"{domain}/zero-shot"]["final_val_perplexity"]
        ax.axhline(zero, color="#7f7f7f", linestyle=":", label="gcnn-moe-en, zero-shot")
        theirs = {f["id"]: f["ours"] for f in result["figures"]}
        for m in base.report_minutes(settings):
            value = theirs.get(f"{domain}/{base.EXTENDED}@{m:g}min/gcnn-en")
            if value is not None:
                ax.plot([m], [value], "o", color="#1f77b4", label="gcnn-en, extended" if m == base.report_minutes(
                    settings)[0] else None)
        ax.set_yscale("log")
        ax.set_title(domain)
        ax.set_xlabel("training minutes")
    axes[0][0].set_ylabel("validation perplexity per word")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
