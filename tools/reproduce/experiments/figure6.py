"""figure6 of `zoo reproduce`: Dauphin et al. (2016) §5.3, Figure 6: gcnn-ptb trained with the
paper's recipe (§4.2–4.3: weight normalisation and gradient clipping), without clipping, and
without weight normalisation at the best learning rate of a short sweep."""

import math

from zoo.tools.reproduce.curve_plot import plot_curves
from zoo.tools.reproduce.curves import QUICK_MODEL, CurvesExperiment

SWEEP_RATES = (1.0, 0.1, 0.01)


def figure6_variants(quick):
    from zoo.optimizers import PAPER_RECIPE, without_clipping

    small = dict(QUICK_MODEL, blocks=[[[4, 16]]] * 2) if quick else {}
    recipe = dict(PAPER_RECIPE)
    no_clip = without_clipping(recipe)
    out = {
        "paper": {"label": "weight norm + clipping (the paper's recipe)", "preset": "gcnn-ptb",
                  "overrides": dict(small, optimizer=recipe), "minutes": 3.5},
        "no-clip": {"label": "weight norm, no clipping", "preset": "gcnn-ptb",
                    "overrides": dict(small, optimizer=no_clip), "minutes": 3.5},
    }
    for rate in SWEEP_RATES:
        out[f"sweep-{rate:g}"] = {"label": f"no weight norm, learning rate {rate:g} (sweep)", "preset": "gcnn-ptb",
                                  "overrides": dict(small, weight_norm=False, optimizer=dict(recipe, learning_rate=rate)),
                                  "minutes": 1.5}
    out["no-wn"] = {"label": "no weight norm, clipping (best rate of the sweep)", "preset": "gcnn-ptb",
                    "overrides": dict(small, weight_norm=False, optimizer=dict(recipe, learning_rate=None)),
                    "minutes": 3.5, "learning_rate_from": [f"sweep-{r:g}" for r in SWEEP_RATES]}
    return out


class Figure6(CurvesExperiment):
    def resolve(self, key, variant, done):
        if "learning_rate_from" not in variant:
            return variant
        def value(k):
            u = done[k]
            return u["final_val_perplexity"] if u.get("final_val_perplexity") is not None else math.inf
        best = min(variant["learning_rate_from"], key=value)
        rate = done[best]["overrides"]["optimizer"]["learning_rate"]
        overrides = dict(variant["overrides"], optimizer=dict(variant["overrides"]["optimizer"], learning_rate=rate))
        return dict(variant, overrides=overrides, label=f"no weight norm, clipping (learning rate {rate:g}, the "
                                                            "sweep's best)")

    def plot(self, result, path):
        plot_curves(result, path, f"{self.PAPER}: weight normalisation and clipping, Penn Treebank",
                    keys=["paper", "no-clip", "no-wn"])


def _figure6_check(units, order):
    main = [k for k in order if k in ("paper", "no-clip", "no-wn")]
    first = units[main[0]]["label"]
    return ("The paper: its recipe (weight norm + clipping) reaches the lowest perplexity; ours: "
            + ("the same." if main[0] == "paper" else f"{first} is lower.")
            + " Order of the three curves: " + " < ".join(units[k]["label"] for k in main) + ".")


FIGURE6 = Figure6(
    "figure6", "weight normalisation and gradient clipping (Figure 6) on the Penn Treebank: gcnn-ptb trained with "
    "the paper's recipe (Nesterov momentum 0.99, learning rate 1, gradient norm clipped to 0.1, weight norm), "
    "without clipping, and without weight norm at the best learning rate of a 1.5-minute sweep "
    f"({', '.join(f'{r:g}' for r in SWEEP_RATES)}); 3.5 minutes each",
    "Dauphin et al. 2016, §5.3, Figure 6", figure6_variants, 3.5,
    notes=["The paper's Figure 6 is on WikiText-103 and Google Billion Word: weight norm with clipping converges "
           "fastest; without weight norm, and without clipping, training is slower and less stable."],
    ordering=_figure6_check)

EXPERIMENTS = (FIGURE6,)
