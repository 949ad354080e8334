"""table7 of `zoo reproduce`: Shazeer et al. (2017), Appendix C, Table 7's trend at treebank scale
(validation perplexity falling as experts are added at the same computation per token) and Table
6's balance statistics."""

from zoo.tools.reproduce.curve_plot import plot_curves
from zoo.tools.reproduce.curves import CurvesExperiment, figure

TABLE7_PAPER = {"dense": 46.1, "moe-4": 45.0, "moe-32": 39.7, "moe-256": 35.7}  # 1B Word, test, 10 epochs
TABLE6_PAPER = {"cv_importance": 0.06, "cv_load": 0.05, "max_load_ratio": 1.14}  # MoE-256, losses 0.1/0.1
TABLE7_EPOCHS = 3


def table7_variants(quick):
    from zoo.registry import get_preset

    def experts(n):
        layers = [dict(spec) for spec in get_preset("lstm-moe-ptb").config["layers"]]
        for spec in layers:
            if spec["type"] == "moe":
                spec["num_experts"] = n
                if quick:
                    spec["hidden_units"] = 8
            elif quick:
                spec["units"] = 16
        return {"layers": layers, **({"embedding_dim": 16} if quick else {})}

    dense = {}
    if quick:
        dense = {"embedding_dim": 16, "layers": [{"type": "lstm", "units": 16}, {"type": "ffn", "hidden_units": [32]},
                                                 {"type": "lstm", "units": 16}]}
    out = {"dense": {"label": "MoE-1-Wide (lstm-wide-ptb: dense, 1 × 1024)", "preset": "lstm-wide-ptb",
                     "overrides": dense, "epochs": TABLE7_EPOCHS, "minutes": None}}
    for n in (4, 32, 256):
        out[f"moe-{n}"] = {"label": f"MoE-{n} (lstm-moe-ptb, {n} experts of 256, k=4)", "preset": "lstm-moe-ptb",
                           "overrides": experts(n), "epochs": TABLE7_EPOCHS, "minutes": None}
    return out


class Table7(CurvesExperiment):
    def balance(self, unit):
        """Table 6's statistics averaged over the last validation interval's training batches."""
        last = unit["curve"][-1] if unit["curve"] else {}
        out = {}
        for name in ("cv_importance", "cv_load", "max_load_ratio"):
            values = [v for k, v in last.items() if k.endswith("_" + name)]
            out[name] = values[0] if values else None
        return out

    def figures(self, settings, units):
        out = []
        for key in settings["variants"]:
            u = units[key]
            out.append(figure(f"val/{key}", f"{u['label']}: validation perplexity after {TABLE7_EPOCHS} epochs",
                              u.get("final_val_perplexity"), TABLE7_PAPER[key], comparable=False,
                              paper_hardware="1B Word test, 10 epochs", ours_hardware="PTB valid",
                              params=u["params"], steps=u["steps"]))
            if key != "dense":
                b = self.balance(u)
                for name, label in (("cv_importance", "CV(Importance)"), ("cv_load", "CV(Load)"),
                                    ("max_load_ratio", "max(Load) / mean(Load)")):
                    out.append(figure(f"{name}/{key}", f"{u['label']}: {label}", b[name],
                                      TABLE6_PAPER[name] if key == "moe-256" else None, unit=""))
        return out

    def extras(self, settings, units):
        result = super().extras(settings, units)
        ppl = {k: units[k].get("final_val_perplexity") for k in settings["variants"]}
        finite = all(v is not None for v in ppl.values())
        falls = finite and ppl["moe-4"] > ppl["moe-32"] > ppl["moe-256"]
        beats = finite and all(ppl[k] < ppl["dense"] for k in ("moe-4", "moe-32", "moe-256"))
        result["trend"] = {"falls_with_experts": falls, "every_moe_beats_dense": beats}
        result["notes"] = [
            "The paper (Table 7, 1B Word, 10 epochs, test): MoE-1-Wide 46.1, MoE-4 45.0, MoE-32 39.7, MoE-256 35.7 "
            "at 8.4M ops per timestep; here the treebank's validation set after "
            f"{TABLE7_EPOCHS} epochs, the same computation per token in every model (k=4 experts of 256, or one "
            "dense layer of 1024).",
            "Trend: validation perplexity " + ("falls" if falls else "does not fall") + " from 4 to 32 to 256 experts; "
            + ("every MoE beats" if beats else "not every MoE beats") + " the dense baseline.",
            "Table 6's statistics are averaged over the training batches of the last validation interval "
            "(the paper: MoE-256 with losses 0.1/0.1, CV(Importance) 0.06, CV(Load) 0.05, max/mean load 1.14).",
        ] + result["notes"]
        return result

    def plot(self, result, path):
        plot_curves(result, path, f"{self.PAPER}: the trend at treebank scale (validation, PTB)")


TABLE7 = Table7(
    "table7", f"Table 7's trend at treebank scale: lstm-moe-ptb with 4, 32 and 256 experts (k=4, the same computation "
    f"per token) and its compute-matched dense baseline lstm-wide-ptb, {TABLE7_EPOCHS} epochs each, with Table 6's "
    "balance statistics", "Shazeer et al. 2017, Appendix C, Tables 6 and 7", table7_variants, None,
    validate_every=150)

EXPERIMENTS = (TABLE7,)
