"""moe-en: does the sparse mixture of experts gain over its dense twin at the same computation per
token, on gcnn-en's corpus? Two steps, each resumable:

    python -m zoo.tools.corpora english corpora/en
    python -m zoo.tools.reproduce.moe_en train --corpus corpora/en --runs runs/moe-en \\
        --variants dense,moe-64 --seeds 0,1
    python -m zoo.tools.reproduce.moe_en record --corpus corpora/en --runs runs/moe-en \\
        --out results/moe-en.json

`train` runs `zoo train` for every (variant, seed) one after the other, into RUNS/VARIANT-sSEED:
`dense` is the preset gcnn-wide-en (gcnn-en with one feed-forward layer of hidden 1,024 after its
fourth block), `moe-N` the preset gcnn-moe-en with N experts (hidden 512, k=2) in that place, so
every variant has the same inference multiply-adds per token within 0.4%
(`zoo.models.compute`). Every run: the same optimiser (Adam 2e-3, global norm 1.0, cosine to 5%
over the run's steps), steps (3,000 of 32 × 64 tokens), tokens and data order (`--seed`: the
weights' seed and the data order's), a tokenizer learned from the corpus's training split as
gcnn-en's (the same file: the same text and settings), validated every 500 steps. A run stopped
in the middle (Ctrl-C, a kill, the end of a session) resumes from its last checkpoint (every 250
steps) when `train` is run again; a finished run is skipped. `--steps N` trains every run of a
runs directory for N steps instead (one count per directory: `record` refuses a mix).

`record` scores every finished run's kept weights (`best/`, its lowest validation, as `zoo train`
keeps them and as gcnn-en's card is measured) per word on the corpus's test split
(gcnn-en's test documents), measures the mixtures' balance on their last 48 training batches
(`moe_balance`: per batch and over windows of 12 batches, 24,576 tokens, about the paper's
tokens a batch) and writes the JSON that `zoo reproduce --results` puts into RESULTS.md, with a
plot beside it. With `--keep-earlier`, the seeds of the record already at `--out` whose runs are
no longer in RUNS (a machine replaced between two seeds) keep the figures that record gave them,
and its notes name them.
"""

import argparse
import json
import os
import statistics
import subprocess

from zoo.files import write_json
from zoo.tools.benchmarks.harness import machine
from zoo.tools.reproduce.record import git_state, now, portable

STEPS = 3_000
VALIDATE_EVERY = 500
CHECKPOINT_EVERY = 250
TABLE7_PAPER = {"dense": 46.1, "moe-4": 45.0, "moe-32": 39.7, "moe-256": 35.7}  # 1B Word, test, 10 epochs
TABLE6_PAPER = {"cv_importance": 0.06, "cv_load": 0.05, "max_load_ratio": 1.14}  # MoE-256, 0.1/0.1
BALANCE_BATCHES, BALANCE_WINDOW = 48, 12


def variant_command(variant, seed, corpus, out, steps=STEPS):
    """The `zoo train` command of one run: its cosine schedule over its own `steps` (the presets'
    optimiser decays over the shipped model's 10,000)."""
    from zoo.registry import get_preset

    if variant == "dense":
        preset, overrides = "gcnn-wide-en", []
    elif variant.startswith("moe-") and variant[4:].isdigit():
        moe = dict(get_preset("gcnn-moe-en").config["moe"], num_experts=int(variant[4:]))
        preset, overrides = "gcnn-moe-en", ["--set", "moe=" + json.dumps(moe, separators=(",", ":"))]
    else:
        raise ValueError(f"Unknown variant {variant!r}; expected dense or moe-N (N experts, e.g. moe-64).")
    optimizer = get_preset(preset).config["optimizer"]
    if optimizer["decay_steps"] != steps:
        schedule = dict(optimizer, decay_steps=steps)
        overrides = ["--set", "optimizer=" + json.dumps(schedule, separators=(",", ":"))] + overrides
    return (["zoo", "train", "--preset", preset, "--data", corpus, "--out", out, "--steps", str(steps),
             "--steps-per-epoch", str(VALIDATE_EVERY), "--checkpoint-every", str(CHECKPOINT_EVERY),
             "--log-every", "100", "--seed", str(seed)] + overrides)


def finished(run):
    return os.path.isfile(os.path.join(run, "final", "config.json"))


def schedule_of(run):
    """`[decay_steps, final_fraction]` of a finished run's cosine learning rate (None, None for a constant one)."""
    with open(os.path.join(run, "final", "config.json")) as f:
        optimizer = json.load(f).get("config", {}).get("optimizer", {})
    return [optimizer.get("decay_steps"), optimizer.get("final_fraction")]


def corpus_share(corpus):
    """`(train_fraction, training words)` of a corpus of `corpora english` (its corpus.json; the
    fraction is 1.0 for the whole corpus, and both are None without a corpus.json)."""
    try:
        with open(os.path.join(corpus, "corpus.json")) as f:
            manifest = json.load(f)
    except OSError:
        return None, None
    return manifest.get("train_fraction", 1.0), manifest.get("training_words", {}).get("train")


def train(corpus, runs, variants, seeds, steps=STEPS):
    os.makedirs(runs, exist_ok=True)
    for seed in seeds:
        for variant in variants:
            run = os.path.join(runs, f"{variant}-s{seed}")
            if finished(run):
                print(f"{run}: finished, skipped", flush=True)
                continue
            command = variant_command(variant, seed, corpus, run, steps)
            print("$ " + " ".join(command), flush=True)
            with open(run + ".log", "a") as log:
                subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)


FIGURES_FILE = "moe_en_figures.json"  # a run's figures, kept beside its best/ so that `record` scores it once


def _run_figures(run, corpus, variant, seed):
    """A run's figures (scored once: kept in RUN/moe_en_figures.json, made again when its best/
    is newer)."""
    cache = os.path.join(run, FIGURES_FILE)
    best = os.path.join(run, "best", "model.weights.h5")
    if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(best):
        with open(cache) as f:
            return json.load(f)
    out = _score_run(run, corpus, variant, seed)
    write_json(cache, out)
    return out


def _score_run(run, corpus, variant, seed):
    import zoo
    from zoo.models.compute import multiply_adds_per_token
    from zoo.tools.reproduce.model_card import evaluate
    from zoo.tools.reproduce.moe_balance import measure

    with open(os.path.join(run, "history.json")) as f:
        history = json.load(f)
    model = zoo.load(os.path.join(run, "best"))
    out = {"params": model.count_params(), "multiply_adds_per_token": multiply_adds_per_token(model)["total"],
           "steps": history[-1]["step"], "minutes": round(history[-1]["seconds"] / 60, 1),
           # per word on validation; per token both on validation and in training (the mean since the
           # validation before, with dropout on): how far training has drawn away from unseen text
           "curve": [{"step": h["step"], "seconds": h["seconds"], "val_perplexity": h["val_perplexity_per_word"],
                      "val_perplexity_per_token": h["val_perplexity"], "train_perplexity_per_token": h["perplexity"]}
                     for h in history],
           "test": evaluate(model, corpus, "test")}
    out["tokens_seen"] = out["steps"] * 32 * 64
    if variant != "dense":
        experts, k = model.moe_layers[0].num_experts, model.moe_layers[0].k
        # assignments each expert receives a step on average (tokens × k over the experts), and over the run
        out["tokens_per_expert_per_step"] = 32 * 64 * k / experts
        out["tokens_per_expert"] = out["tokens_per_expert_per_step"] * out["steps"]
        out["balance"] = measure(os.path.join(run, "best"), corpus, out["steps"] - BALANCE_BATCHES, BALANCE_BATCHES,
                                 BALANCE_WINDOW, seed=seed, log=lambda *a: None)
        out["balance_during_training"] = {k: v for k, v in history[-1].items() if "moe" in k}
    return out


def earlier_seeds(path, runs_found):
    """{variant: {seed: figures}} of the record at `path` for the runs not among `runs_found` (their
    directories gone, or not finished again): what `record --keep-earlier` carries over."""
    try:
        with open(path) as f:
            earlier = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"--keep-earlier: there is no earlier record at {path!r} to keep seeds from.") from None
    return {variant: kept for variant, unit in earlier.get("units", {}).items()
            if (kept := {int(seed): figures for seed, figures in unit.get("seeds", {}).items()
                         if f"{variant}-s{seed}" not in runs_found})}


def record(corpus, runs, out_path, keep_earlier=False):
    if not os.path.isdir(runs) and not keep_earlier:
        raise ValueError(f"The runs directory {runs!r} does not exist; train the runs first "
                         "(python -m zoo.tools.reproduce.moe_en train --runs DIR).")
    runs_found = sorted(d for d in os.listdir(runs) if finished(os.path.join(runs, d))) if os.path.isdir(runs) else []
    kept = earlier_seeds(out_path, runs_found) if keep_earlier else {}
    if not runs_found and not kept:
        raise ValueError(f"No finished run in {runs}; train them first (python -m zoo.tools.reproduce.moe_en train).")
    by_variant = {variant: dict(seeds) for variant, seeds in kept.items()}
    for name in runs_found:
        variant, _, seed = name.rpartition("-s")
        print(f"scoring {name}", flush=True)
        figures = _run_figures(os.path.join(runs, name), corpus, variant, int(seed))
        by_variant.setdefault(variant, {})[int(seed)] = {**figures, "schedule": schedule_of(os.path.join(runs, name))}
    steps = {s["steps"] for seeds in by_variant.values() for s in seeds.values()}
    if len(steps) > 1:
        raise ValueError(f"The runs in {runs} were trained for different steps ({', '.join(map(str, sorted(steps)))}); "
                         "keep one step count per runs directory.")
    steps = steps.pop()
    schedules = {tuple(s.get("schedule") or (None, None)) for seeds in by_variant.values() for s in seeds.values()}
    if len(schedules) > 1:
        raise ValueError(f"The runs in {runs} decayed their learning rate over different steps "
                         f"({', '.join(str(d) for d, _ in sorted(schedules, key=str))}); keep one schedule per runs "
                         "directory.")
    decay, fraction = schedules.pop()
    schedule = "a learning rate that does not decay" if decay is None else \
        f"the learning rate's cosine decay over {decay:,} steps" + \
        (f" (then {fraction:.0%} of it for the last {steps - decay:,})" if decay < steps and fraction else "")
    order = sorted(by_variant, key=lambda v: 0 if v == "dense" else int(v[4:]))
    units, figures = {}, []
    dense = by_variant.get("dense", {})
    for variant in order:
        seeds = by_variant[variant]
        tests = [s["test"]["per_word"] for s in seeds.values()]
        first = seeds[min(seeds)]
        label = "dense twin (gcnn-wide-en, one feed-forward layer of 1,024)" if variant == "dense" else \
            f"MoE-{variant[4:]} (gcnn-moe-en, {variant[4:]} experts of 512, k=2)"
        units[variant] = {"label": label, "params": first["params"], "curve": first["curve"], "seeds": seeds,
                          "test_per_word": tests}
        gaps = [s["curve"][-1]["val_perplexity_per_token"] / s["curve"][-1]["train_perplexity_per_token"]
                for s in seeds.values() if "train_perplexity_per_token" in s["curve"][-1]]
        if gaps:
            figures.append({"id": f"gap/{variant}", "label": f"{label}: validation ÷ training perplexity per token at "
                            "the last validation (training's with dropout, the mean since the validation before), "
                            f"mean of {len(gaps)} seed{'s' if len(gaps) > 1 else ''}", "unit": "",
                            "ours": statistics.mean(gaps), "paper": None})
        figures.append({"id": f"test/{variant}", "label": f"{label}: test perplexity per word, mean of "
                        f"{len(tests)} seed{'s' if len(tests) > 1 else ''} (spread {min(tests):,.1f}–{max(tests):,.1f})",
                        "unit": "ppl", "ours": statistics.mean(tests), "ours_hardware": "gcnn-en's test documents",
                        "paper": TABLE7_PAPER.get(variant), "paper_hardware": "1B Word test, 10 epochs",
                        "comparable": False, "params": first["params"], "steps": first["steps"]})
        if variant != "dense" and dense:
            gains = [1 - seeds[s]["test"]["per_word"] / dense[s]["test"]["per_word"] for s in seeds if s in dense]
            # the gain against tokens seen: each validation (per word) against the twin's at the same step
            units[variant]["gain_curve"] = {
                s: [{"tokens": c["step"] * 32 * 64, "gain": 1 - c["val_perplexity"] / d["val_perplexity"]}
                    for c, d in zip(seeds[s]["curve"], dense[s]["curve"]) if c["step"] == d["step"]]
                for s in seeds if s in dense}
            units[variant]["tokens_per_expert_per_step"] = first["tokens_per_expert_per_step"]
            figures.append({"id": f"tokens-per-expert/{variant}", "label": f"{label}: assignments an expert receives "
                            f"a step (32 × 64 tokens × k / experts), {first['tokens_per_expert']:,.0f} over the run's "
                            f"{first['steps']:,} steps", "unit": "", "ours": first["tokens_per_expert_per_step"],
                            "paper": None})
            if gains:
                units[variant]["gain_over_dense"] = gains
                figures.append({"id": f"gain/{variant}", "label": f"{label}: % below the dense twin's test perplexity, "
                                f"mean of the seeds (per seed: {', '.join(f'{100 * g:.1f}%' for g in gains)})", "unit": "",
                                "ours": 100 * statistics.mean(gains), "paper": None})
            b = first["balance"][next(iter(first["balance"]))]
            for name, label6 in (("cv_importance", "CV(Importance)"), ("cv_load", "CV(Load)"),
                                 ("max_load_ratio", "max(Load) / mean(Load)")):
                window = b.get("per_window", {})
                figures.append({"id": f"{name}/{variant}", "label": f"{label}, seed {min(seeds)}: {label6} over {BALANCE_WINDOW} batches "
                                f"({window.get('floor', {}).get('tokens', 0):,} tokens; uniform routing's floor "
                                f"{window.get('floor', {}).get('max_load_ratio' if name == 'max_load_ratio' else 'cv_counts', float('nan')):.3g})",
                                "unit": "", "ours": window.get(name), "paper": TABLE6_PAPER[name]})
    stem = os.path.splitext(os.path.basename(out_path))[0]  # moe-en, or moe-en-10k for a longer set of runs
    share, words = corpus_share(corpus)
    data = "gcnn-en's network, corpus and tokenizer" if share in (None, 1.0) else \
        (f"gcnn-en's network and tokenizer settings on {share:.0%} of its corpus's training documents "
         f"({words:,} words; validation and test unchanged)")
    result = {"experiment": stem, "paper": "Shazeer et al. 2017, Appendix C, Tables 6 and 7, on gcnn-en",
              "description": "A sparse mixture of experts against its dense twin at the same computation per token "
                             f"(4.8M multiply-adds), {data}, {steps:,} steps of 32 × 64 "
                             f"tokens each with {schedule}, per-word perplexity on gcnn-en's test documents, "
                             "with Table 6's balance statistics at about the paper's tokens a batch",
              "quick": False,
              "command": f"python -m zoo.tools.reproduce.moe_en record --corpus {portable(corpus, 'corpora')} "
                         f"--runs {portable(runs, 'runs')} "
                         f"--out {out_path}",
              "git": git_state(), "machine": machine(), "sessions": [{"finished_at": now(), "git": git_state()}],
              "settings": {"variants": {v: {} for v in order}, "steps": steps, "decay_steps": decay,
                           "final_fraction": fraction, "batch": [32, 64], "train_fraction": share,
                           "training_words": words},
              "plot": stem + ".png", "units": units, "figures": figures,
              "notes": ["Each variant's figure is the mean over its seeds of the per-word perplexity of its kept weights "
                        "(best/) on the corpus's test split; the paper's Table 7 figures are 1B Word after 10 epochs, "
                        "at 8.4M ops per timestep, not comparable in value."]
                        + ([f"Kept from the earlier record (their run directories no longer in {portable(runs, 'runs')}): "
                            + ", ".join(f"{v}-s{s}" for v in sorted(kept) for s in sorted(kept[v])) + "."]
                           if kept else [])}
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    write_json(out_path, result)
    plot(result, os.path.join(os.path.dirname(out_path) or ".", stem + ".png"))
    return result


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.tools.reproduce.curve_plot import COLOURS

    fig, (ax, gain_ax, trend_ax) = plt.subplots(1, 3, figsize=(17, 4.8))
    for i, (variant, unit) in enumerate(result["units"].items()):
        colour = COLOURS[i % len(COLOURS)]
        for j, (seed, run) in enumerate(sorted(unit["seeds"].items(), key=lambda kv: int(kv[0]))):
            xs = [c["step"] * 32 * 64 / 1e6 for c in run["curve"]]
            style, marker = ("-", "--", ":")[j % 3], "osv"[j % 3]  # seeds told apart by both
            ax.plot(xs, [c["val_perplexity"] for c in run["curve"]], color=colour, linestyle=style, marker=marker,
                    markersize=3, label=f"{unit['label']}, seed {seed}")
            curve = unit.get("gain_curve", {}).get(seed)
            if curve:
                gain_ax.plot([c["tokens"] / 1e6 for c in curve], [100 * c["gain"] for c in curve], color=colour,
                             linestyle=style, marker=marker, markersize=3, label=f"{unit['label']}, seed {seed}")
    # the trend: test perplexity against the number of experts (dense at 1), each seed and the mean
    counts = {v: 1 if v == "dense" else int(v[4:]) for v in result["units"]}
    for variant, unit in result["units"].items():
        tests = unit["test_per_word"]
        trend_ax.plot([counts[variant]] * len(tests), tests, "o", color="#7f7f7f", markersize=4)
    order = sorted(result["units"], key=counts.get)
    trend_ax.plot([counts[v] for v in order], [statistics.mean(result["units"][v]["test_per_word"]) for v in order],
                  "-s", color="#1f77b4", label="mean of the seeds (grey: each seed)")
    trend_ax.set_xscale("log", base=2)
    trend_ax.set_xticks([counts[v] for v in order], ["dense" if v == "dense" else v[4:] for v in order])
    trend_ax.set_xlabel("experts (same computation per token)")
    trend_ax.set_ylabel("test perplexity per word")
    trend_ax.set_title("Perplexity against the number of experts")
    trend_ax.legend(fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("validation perplexity per word")
    ax.set_title("Validation, per word")
    gain_ax.axhline(0, color="black", linewidth=0.8)
    gain_ax.axhline(10, color="grey", linestyle="--", linewidth=0.8, label="the 10% aimed for")
    gain_ax.set_xlabel("training tokens (millions)")
    gain_ax.set_ylabel("% below the dense twin (validation, same seed and step)")
    gain_ax.set_title("The mixture's gain against tokens seen")
    for a in (ax, gain_ax, trend_ax):
        a.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    gain_ax.legend(fontsize=7)
    settings = result.get("settings", {})
    decay = f"; the learning rate's cosine decay over {settings['decay_steps']:,} of {settings['steps']:,} steps" \
        if settings.get("decay_steps") else ""
    share = settings.get("train_fraction")
    data = f"; {share:.0%} of the corpus's training documents" if share and share < 1 else ""
    fig.suptitle("A sparse mixture of experts against its dense twin, the same computation per token" + decay + data)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m zoo.tools.reproduce.moe_en", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train every (variant, seed) run not yet finished, resuming any cut short")
    t.add_argument("--variants", default="dense,moe-64", help="dense and moe-N, comma-separated")
    t.add_argument("--seeds", default="0,1")
    t.add_argument("--steps", type=int, default=STEPS,
                   help=f"steps of every run (default {STEPS:,}); keep one count per runs directory")
    r = sub.add_parser("record", help="score the finished runs and write the JSON and its plot")
    r.add_argument("--out", default=os.path.join("results", "moe-en.json"))
    r.add_argument("--keep-earlier", action="store_true",
                   help="keep the seeds of the record already at --out whose runs are no longer in --runs")
    for s in (t, r):
        s.add_argument("--corpus", required=True, help="the corpus of python -m zoo.tools.corpora english")
        s.add_argument("--runs", default=os.path.join("runs", "moe-en"))
    args = parser.parse_args(argv)
    if args.command == "train":
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        for v in variants:  # every name checked before anything runs
            try:
                variant_command(v, 0, args.corpus, "")
            except ValueError as e:
                parser.error(str(e))
        if args.steps < VALIDATE_EVERY:
            parser.error(f"--steps {args.steps} is fewer than one validation ({VALIDATE_EVERY} steps); "
                         f"give at least {VALIDATE_EVERY}.")
        train(args.corpus, args.runs, variants, [int(s) for s in args.seeds.split(",")], args.steps)
    else:
        try:
            record(args.corpus, args.runs, args.out, args.keep_earlier)
        except ValueError as e:
            parser.error(str(e))


if __name__ == "__main__":
    main()
