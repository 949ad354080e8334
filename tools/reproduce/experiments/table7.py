"""table7 and table7-en of `zoo reproduce`: Shazeer et al. (2017), Appendix C, Table 7's trend
(validation perplexity falling as experts are added at the same computation per token) and Table
6's balance statistics, at treebank scale (table7) and on the 5M-word English corpus of
`python -m zoo.tools.corpora english` with all six sources in training (table7-en)."""

import json
import os

from zoo.tools.reproduce.curve_plot import plot_curves
from zoo.tools.reproduce.curves import CurvesExperiment, figure

TABLE7_PAPER = {"dense": 46.1, "moe-4": 45.0, "moe-32": 39.7, "moe-256": 35.7}  # 1B Word, test, 10 epochs
TABLE6_PAPER = {"cv_importance": 0.06, "cv_load": 0.05, "max_load_ratio": 1.14}  # MoE-256, losses 0.1/0.1
TABLE7_EPOCHS = 3
# table7-en: every source of the English corpus in training (5.04M words), a word vocabulary as the
# paper's (its most frequent words, the rest <unk>), one pass each
ENGLISH_SOURCES = ("sotu", "wikipedia", "kjv", "shakespeare", "python-docs", "fortunes")
ENGLISH_VOCABULARY = 32_000
ENGLISH_EPOCHS = 1
ENGLISH_VALIDATE_EVERY = 500


def english_corpus():
    """Where table7-en reads (and, when absent, writes) its corpus: $ZOO_ENGLISH_CORPUS, default
    corpora/en-all."""
    return os.environ.get("ZOO_ENGLISH_CORPUS", os.path.join("corpora", "en-all"))


def english_corpus_ready(data):
    """Whether `data` holds table7-en's corpus (False: nothing there yet, it is to be written);
    a folder holding other text is refused in one sentence rather than trained on."""
    manifest_path = os.path.join(data, "corpus.json")
    build = ("python -m zoo.tools.corpora english DIR --sources " + ",".join(ENGLISH_SOURCES) + " --hold-out ''")
    if not os.path.isfile(manifest_path):
        if os.path.exists(os.path.join(data, "train.txt")):
            raise ValueError(f"{data!r} holds a train.txt but no corpus.json, so it is not a corpus written by "
                             "zoo.tools.corpora; table7-en needs the English corpus with every source in training: "
                             f"point $ZOO_ENGLISH_CORPUS at an empty or new folder, or write one with `{build}`.")
        return False
    with open(manifest_path) as f:
        manifest = json.load(f)
    sources = manifest.get("sources", {})
    training = sorted(n for n, s in sources.items() if s.get("role") == "training")
    held_out = sorted(n for n, s in sources.items() if s.get("role") != "training")
    if training != sorted(ENGLISH_SOURCES) or held_out or manifest.get("one_document_per_line"):
        raise ValueError(f"{data!r} holds an English corpus of other sources (training: {', '.join(training) or 'none'}; "
                         f"held out: {', '.join(held_out) or 'none'}{'; one document per line' if manifest.get('one_document_per_line') else ''}); "
                         f"table7-en needs all six in training, one paragraph per line: point $ZOO_ENGLISH_CORPUS at "
                         f"an empty or new folder, or write one with `{build}`.")
    return True


def table7_variants(quick, epochs=TABLE7_EPOCHS):
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
                     "overrides": dense, "epochs": epochs, "minutes": None}}
    for n in (4, 32, 256):
        out[f"moe-{n}"] = {"label": f"MoE-{n} (lstm-moe-ptb, {n} experts of 256, k=4)", "preset": "lstm-moe-ptb",
                           "overrides": experts(n), "epochs": epochs, "minutes": None}
    return out


class Table7(CurvesExperiment):
    epochs = TABLE7_EPOCHS
    data_name = "PTB valid"
    scale = "treebank scale"
    data_label = "Penn Treebank"
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
            n = settings["variants"][key].get("epochs", self.epochs)
            epochs = f"{n:g} epoch{'s' if n != 1 else ''}"
            out.append(figure(f"val/{key}", f"{u['label']}: validation perplexity after {epochs}",
                              u.get("final_val_perplexity"), TABLE7_PAPER[key], comparable=False,
                              paper_hardware="1B Word test, 10 epochs", ours_hardware=self.data_name,
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
            f"at 8.4M ops per timestep; here {self.data_name} after {self.epochs} epoch"
            f"{'s' if self.epochs != 1 else ''}, the same computation per token in every model (k=4 experts of 256, "
            "or one dense layer of 1024).",
            "Trend: validation perplexity " + ("falls" if falls else "does not fall") + " from 4 to 32 to 256 experts; "
            + ("every MoE beats" if beats else "not every MoE beats") + " the dense baseline.",
            "Table 6's statistics are averaged over the training batches of the last validation interval "
            "(the paper: MoE-256 with losses 0.1/0.1, CV(Importance) 0.06, CV(Load) 0.05, max/mean load 1.14).",
        ] + result["notes"]
        return result

    def plot(self, result, path):
        plot_curves(result, path, f"{self.PAPER}: the trend at {self.scale} (validation, {self.data_name})",
                    data_label=self.data_label)


class Table7English(Table7):
    """table7-en: Table 7's four models on the English corpus, every source in training."""
    epochs = ENGLISH_EPOCHS
    data_name = "English corpus valid"
    scale = "5M words"
    data_label = "English corpus"

    def settings(self, quick=False, repeats=None, minutes=None):
        out = super().settings(quick=quick, repeats=repeats, minutes=minutes)
        out["train"]["tokenizer"] = "word"
        if not quick:
            out["data"] = english_corpus()
            out["train"]["max_vocabulary"] = ENGLISH_VOCABULARY
            out["corpus"] = {"sources": list(ENGLISH_SOURCES), "hold_out": [],
                             "built_by": "python -m zoo.tools.corpora english DIR --sources "
                                         + ",".join(ENGLISH_SOURCES) + " --hold-out ''"}
        return out

    def extras(self, settings, units):
        result = super().extras(settings, units)
        shares = [c["unknown_share"] for u in units.values() for c in u.get("curve", [])[-1:] if "unknown_share" in c]
        if shares:
            size = settings["train"].get("max_vocabulary")
            result["notes"].append(f"{shares[0]:.2%} of the validation words are <unk> (outside the vocabulary"
                                   + (f" of {size:,} ids" if size else "") + "), each scored as one token, the same "
                                   "in every model.")
        return result

    def run(self, settings, pending, save, log, done=None):
        data = settings["data"]
        if not settings["quick"] and not english_corpus_ready(data):
            from zoo.tools.corpora import english

            log(f"{self.NAME}: writing the English corpus into {data} (every source in training; "
                "$ZOO_ENGLISH_CORPUS chooses another folder)")
            documents, words = english.build(data, sources=ENGLISH_SOURCES, hold_out=())
            log(f"{self.NAME}: {documents:,} documents; training words {words['train']:,}")
        super().run(settings, pending, save, log, done)


TABLE7 = Table7(
    "table7", f"Table 7's trend at treebank scale: lstm-moe-ptb with 4, 32 and 256 experts (k=4, the same computation "
    f"per token) and its compute-matched dense baseline lstm-wide-ptb, {TABLE7_EPOCHS} epochs each, with Table 6's "
    "balance statistics", "Shazeer et al. 2017, Appendix C, Tables 6 and 7", table7_variants, None,
    validate_every=150)

TABLE7_EN = Table7English(
    "table7-en", f"Table 7's trend on the 5M-word English corpus (python -m zoo.tools.corpora english, all six "
    f"sources in training, a word vocabulary of {ENGLISH_VOCABULARY:,} ids): lstm-moe-ptb with 4, 32 and 256 experts "
    f"(k=4, the same computation per token) and the dense lstm-wide-ptb, {ENGLISH_EPOCHS} epoch each, with Table 6's "
    "balance statistics", "Shazeer et al. 2017, Appendix C, Tables 6 and 7", lambda quick: table7_variants(
        quick, ENGLISH_EPOCHS), None, validate_every=ENGLISH_VALIDATE_EVERY)

EXPERIMENTS = (TABLE7, TABLE7_EN)
