"""figure3, figure5, figure3-deep, depth-sweep and figure5-deep of `zoo reproduce`: Dauphin et al. (2016) §5.2,
the gating ablations: GLU against GTU, ReLU and Tanh (Figure 3), and against linear and bilinear
layers (Figure 5), in gcnn-ptb on the Penn Treebank under the same budget per variant; Figures 3
and 5 again on an 8-block GCNN, and GLU against Tanh and ReLU at 4, 8 and 12 blocks."""

import math

from zoo.tools.reproduce.curve_plot import plot_curves
from zoo.tools.reproduce.curves import QUICK_MODEL, CurvesExperiment, figure

GATED_WIDTH = 128  # gcnn-ptb's blocks: 3,096,850 parameters with a gated activation
UNGATED_WIDTH = 144  # one kernel per layer instead of two: 3,072,978 parameters (-0.8%)
GATING_LABELS = {"glu": "GLU", "gtu": "GTU", "relu": "ReLU", "tanh": "Tanh", "linear": "Linear", "bilinear": "Bilinear"}
GATED = ("glu", "gtu", "bilinear")


def gating_variants(activations, minutes):
    def variants(quick):
        out = {}
        for a in activations:
            width = (16 if a in GATED else 18) if quick else (GATED_WIDTH if a in GATED else UNGATED_WIDTH)
            overrides = {"activation": a, "blocks": [[[4, width]]] * (2 if quick else 4)}
            if quick:
                overrides.update(QUICK_MODEL)
            out[a] = {"label": GATING_LABELS[a], "preset": "gcnn-ptb", "overrides": overrides, "minutes": minutes}
        return out
    return variants


def _order_check(expected, what):
    """A note comparing the measured order of `expected` (labels, best first) with the paper's."""
    def check(units, order):
        measured = [units[k]["label"] for k in order if units[k]["label"] in expected]
        same = measured == list(expected)
        return (f"The paper's ordering ({what}): {' < '.join(expected)}; ours "
                + ("is the same." if same else f"differs: {' < '.join(measured)}."))
    return check


FIGURE3 = CurvesExperiment(
    "figure3", "the gating ablation of Figure 3 on the Penn Treebank: GLU, GTU, ReLU and Tanh blocks in gcnn-ptb "
    "(ungated layers widened from 128 to 144 to keep the parameter count within 1%), same data order, 3.5 minutes each",
    "Dauphin et al. 2016, §5.2, Figure 3", gating_variants(("glu", "gtu", "relu", "tanh"), 3.5), 3.5,
    notes=["The paper's Figure 3 is on WikiText-103 and Google Billion Word with its large models; this is gcnn-ptb "
           "(4 residual blocks, dropout 0.2, Adam 2e-3) on the treebank under the same budget per variant.",
           "Paper: GLU converges fastest and lowest; GTU and Tanh are well behind; ReLU (a linear path with a gate "
           "of ones where positive) is close to GLU."],
    ordering=_order_check(("GLU", "ReLU", "GTU", "Tanh"), "Figure 3, lowest perplexity first"))

FIGURE5 = CurvesExperiment(
    "figure5", "the linear-to-GLU ablation of Figure 5 on the Penn Treebank: linear, bilinear and GLU blocks in "
    "gcnn-ptb (the linear model widened from 128 to 144 to keep the parameter count within 1%), same data order, "
    "3.5 minutes each",
    "Dauphin et al. 2016, §5.2, Figure 5", gating_variants(("linear", "bilinear", "glu"), 3.5), 3.5,
    notes=["The paper's Figure 5 is on Google Billion Word; this is gcnn-ptb on the treebank under the same budget "
           "per variant. GLU is trained again here (not shared with figure3): the two GLU runs differ only by "
           "the machine's noise, a measure of it."],
    ordering=_order_check(("GLU", "Bilinear", "Linear"), "Figure 5, lowest perplexity first"))



# ---- the gating ablation where depth makes it (deep GCNNs, a depth sweep) -------------------------
DEEP_KERNEL = 5  # 8 blocks of kernel 5: receptive field 33 tokens
# The ungated width keeping each depth's parameter count within 0.5% of the gated model's (width 128).
UNGATED_WIDTHS = {4: 148, 8: 158, 12: 164}
DEEP_MINUTES = 20.0  # figure3-deep, each run
SWEEP_MINUTES = 10.0  # depth-sweep, each run
SWEEP_DEPTHS = (4, 8, 12)
DEEP_FIGURE5_PASSES = 6  # figure5-deep, each run: 6 passes over the treebank at a constant learning rate


def deep_variant(activation, depth, minutes, quick):
    if quick:
        width = 16 if activation in GATED else 18
        overrides = dict(QUICK_MODEL, activation=activation, blocks=[[[DEEP_KERNEL, width]]] * min(depth, 3))
    else:
        width = GATED_WIDTH if activation in GATED else UNGATED_WIDTHS[depth]
        overrides = {"activation": activation, "blocks": [[[DEEP_KERNEL, width]]] * depth}
    return {"label": f"{GATING_LABELS[activation]}, {depth} blocks", "preset": "gcnn-ptb", "overrides": overrides,
            "minutes": minutes, "depth": depth, "activation": activation}


def deep_variants(quick):
    return {a: deep_variant(a, 8, DEEP_MINUTES, quick) for a in ("glu", "gtu", "relu", "tanh")}


def deep_figure5_variants(quick):
    """figure5-deep trains a number of passes, not minutes: the same updates for every variant
    whatever the shared machine's speed."""
    return {a: dict(deep_variant(a, 8, None, quick), epochs=DEEP_FIGURE5_PASSES) for a in ("linear", "bilinear", "glu")}


def sweep_variants(quick):
    return {f"{a}-{d}": deep_variant(a, d, SWEEP_MINUTES, quick) for d in SWEEP_DEPTHS for a in ("glu", "tanh", "relu")}


def gap_per_update(glu, other):
    """Per update rather than per minute: `other`'s validation perplexity over GLU's minus one at
    the last validation step both runs reached, and that step (None, None if they share none).
    Unlike the gap after a time budget it does not depend on how fast the machine ran each. A run
    that diverged has no gap."""
    if glu.get("diverged") or other.get("diverged"):
        return None, None
    def finite(c):
        return c.get("val_perplexity") is not None and math.isfinite(c["val_perplexity"])

    at = {c["step"]: c["val_perplexity"] for c in glu.get("curve", []) if finite(c)}
    shared = [c["step"] for c in other.get("curve", []) if finite(c) and c["step"] in at]
    if not shared:
        return None, None
    step = max(shared)
    value = next(c["val_perplexity"] for c in other["curve"] if c["step"] == step)
    return value / at[step] - 1, step


def gap_figures(glu, other, suffix, label):
    """`other`'s two gaps to GLU as figures: after the time budget (`gap/SUFFIX`) and at the same
    update (`gap-per-update/SUFFIX`)."""
    g, o = glu.get("final_val_perplexity"), other.get("final_val_perplexity")
    per_update, step = gap_per_update(glu, other)
    return [figure(f"gap/{suffix}", label, o / g - 1 if g and o else None, unit="fraction"),
            figure(f"gap-per-update/{suffix}", f"{label}, at the same update", per_update, unit="fraction", step=step)]


class DepthSweep(CurvesExperiment):
    COLOURS = {"glu": "#1f77b4", "tanh": "#d62728", "relu": "#2ca02c"}
    LINES = {4: ":", 8: "--", 12: "-"}

    def plot(self, result, path):
        """One colour per activation, one line style per depth, cut at perplexity 300."""
        variants = result["settings"]["variants"]
        styles = {k: (self.COLOURS[v["activation"]], self.LINES.get(v["depth"], "-")) for k, v in variants.items()}
        plot_curves(result, path, f"{self.PAPER}: validation perplexity on the Penn Treebank", y_max=300,
                    styles=styles)

    def figures(self, settings, units):
        out = super().figures(settings, units)
        for d in SWEEP_DEPTHS:
            for a in ("tanh", "relu"):
                out += gap_figures(units.get(f"glu-{d}", {}), units.get(f"{a}-{d}", {}), f"{a}-{d}",
                                   f"{GATING_LABELS[a]} above GLU at {d} blocks")
        return out

    def extras(self, settings, units):
        out = super().extras(settings, units)
        figs = {f["id"]: f for f in self.figures(settings, units)}
        for a in ("tanh", "relu"):
            moves = ", ".join(f"{d} blocks {figs[f'gap/{a}-{d}']['ours']:+.1%}" for d in SWEEP_DEPTHS
                              if figs[f"gap/{a}-{d}"]["ours"] is not None)
            if moves:
                out["notes"].append(f"{GATING_LABELS[a]}'s validation perplexity above GLU's after the time budget "
                                    f"(positive: GLU lower): {moves}.")
            moves = ", ".join(f"{d} blocks {figs[f'gap-per-update/{a}-{d}']['ours']:+.1%} (step "
                              f"{figs[f'gap-per-update/{a}-{d}']['step']:,})" for d in SWEEP_DEPTHS
                              if figs[f"gap-per-update/{a}-{d}"]["ours"] is not None)
            if moves:
                out["notes"].append(f"{GATING_LABELS[a]} above GLU at the same update (the last validation both "
                                    f"reached): {moves}.")
        return out


class DeepGating(CurvesExperiment):
    """figure3-deep and figure5-deep: each other run's gap to GLU after the budget and at the same
    update; `OTHERS` are the variants set against GLU."""
    OTHERS = ("gtu", "relu", "tanh")

    def figures(self, settings, units):
        out = super().figures(settings, units)
        for a in self.OTHERS:
            out += gap_figures(units.get("glu", {}), units.get(a, {}), a, f"{GATING_LABELS[a]} above GLU")
        return out

    def extras(self, settings, units):
        out = super().extras(settings, units)
        figs = {f["id"]: f for f in self.figures(settings, units)}
        parts = [f"{GATING_LABELS[a]} {figs[f'gap/{a}']['ours']:+.1%} after the budget, "
                 f"{figs[f'gap-per-update/{a}']['ours']:+.1%} at step {figs[f'gap-per-update/{a}']['step']:,}"
                 for a in self.OTHERS if figs[f"gap/{a}"]["ours"] is not None
                 and figs[f"gap-per-update/{a}"]["ours"] is not None]
        if parts:
            out["notes"].append("Above GLU's validation perplexity (positive: GLU lower): " + "; ".join(parts) + ".")
        best = [f"{units[k]['label']} {units[k]['best_val_perplexity']:.1f}" for k in settings["variants"]
                if units.get(k, {}).get("best_val_perplexity") is not None]
        if best:
            out["notes"].append("At a constant learning rate the validation perplexity moves by a few percent from one "
                                "validation to the next; the best along each run: " + ", ".join(best) + ".")
        return out


DEEP_NOTES = [
    f"Deep GCNN: residual blocks of kernel {DEEP_KERNEL} (8 blocks: receptive field {1 + 8 * (DEEP_KERNEL - 1)} "
    "tokens), embedding 128, gated layers of width 128, ungated ones widened to keep the parameter count within "
    "0.5% (" + ", ".join(f"{d} blocks: {w}" for d, w in UNGATED_WIDTHS.items()) + "); dropout 0.2, Adam 2e-3, "
    "the treebank, the same data order.",
    "The paper's claim (§5.2) is about gradient flow through deep stacks: GLU's linear path lets it train "
    "faster and lower than Tanh and GTU, and ahead of ReLU.",
]

FIGURE3_DEEP = DeepGating(
    "figure3-deep", f"the gating ablation of Figure 3 on a deep GCNN (8 residual blocks of kernel {DEEP_KERNEL}, "
    f"receptive field 33): GLU, GTU, ReLU and Tanh at matched parameters, {DEEP_MINUTES:g} minutes each",
    "Dauphin et al. 2016, §5.2, Figure 3 (deep model)", deep_variants, DEEP_MINUTES, notes=DEEP_NOTES,
    ordering=_order_check(("GLU, 8 blocks", "ReLU, 8 blocks", "GTU, 8 blocks", "Tanh, 8 blocks"),
                          "Figure 3, lowest perplexity first"))


class DeepFigure5(DeepGating):
    OTHERS = ("bilinear", "linear")


FIGURE5_DEEP = DeepFigure5(
    "figure5-deep", f"the linear-to-GLU ablation of Figure 5 on the deep GCNN of figure3-deep (8 residual blocks of "
    f"kernel {DEEP_KERNEL}): linear, bilinear and GLU blocks at matched parameters, {DEEP_FIGURE5_PASSES} passes each",
    "Dauphin et al. 2016, §5.2, Figure 5 (deep model)", deep_figure5_variants, None,
    notes=DEEP_NOTES[:1] + ["The paper's Figure 5 (Google Billion Word): GLU lowest, then bilinear, then linear. "
                            f"Each run here trains {DEEP_FIGURE5_PASSES} passes at a constant learning rate (the same "
                            "updates for every variant), so the gap after the budget and the gap at the same update "
                            "are one figure. figure3-deep's GLU ran with the same settings for 20 minutes: a check "
                            "that the runs repeat, step for step, where both reached."],
    ordering=_order_check(("GLU, 8 blocks", "Bilinear, 8 blocks", "Linear, 8 blocks"),
                          "Figure 5, lowest perplexity first"))

DEPTH_SWEEP = DepthSweep(
    "depth-sweep", f"GLU against Tanh and ReLU at 4, 8 and 12 residual blocks (kernel {DEEP_KERNEL}, matched "
    f"parameters), {SWEEP_MINUTES:g} minutes each: how the gating gaps move with depth",
    "Dauphin et al. 2016, §5.2 (Figure 3's gaps against depth)", sweep_variants, SWEEP_MINUTES, notes=DEEP_NOTES)

EXPERIMENTS = (FIGURE3, FIGURE5, FIGURE3_DEEP, DEPTH_SWEEP, FIGURE5_DEEP)
