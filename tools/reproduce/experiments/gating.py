"""figure3 and figure5 of `zoo reproduce`: Dauphin et al. (2016) §5.2, the gating ablations: GLU
against GTU, ReLU and Tanh (Figure 3), and against linear and bilinear layers (Figure 5), in
gcnn-ptb on the Penn Treebank under the same budget per variant."""

from zoo.tools.reproduce.curves import QUICK_MODEL, CurvesExperiment

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

EXPERIMENTS = (FIGURE3, FIGURE5)
