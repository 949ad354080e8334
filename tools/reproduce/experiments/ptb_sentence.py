"""ptb-sentence of `zoo reproduce`: the Penn Treebank at the paper's protocol (Dauphin et al. 2016,
§5): the sentence-level test perplexity of our best GCNN and LSTM recipes, trained a fixed number
of passes with the learning rate annealed, whose weights ship as the trained presets."""

import os

from zoo.models.gcnn_presets import PTB_OPTIMIZER
from zoo.tools.reproduce.curve_plot import COLOURS, plot_curves
from zoo.tools.reproduce.curves import QUICK_MODEL, CurvesExperiment, figure, variant_train

PTB_PAPER = {"gcnn": 108.7, "lstm": 109.3}  # §5, Penn Treebank test perplexity, each sentence alone
PTB_FINAL_FRACTION = 0.02  # Adam's 2e-3 falls along a cosine to 2% of it over the planned steps
# Passes over the training text and dropout of each model, chosen on the validation set by a short
# sweep: the GCNN overfits with less dropout and stops improving with much more, so more dropout
# and more passes than the LSTM, which was still improving where the sweep stopped. gcnn-deep is
# the recipe ptb-recipe's ablations chose (8 blocks instead of 4, tied embeddings).
PTB_EPOCHS = {"gcnn": 20, "gcnn-deep": 20, "lstm": 20}
PTB_DROPOUT = {"gcnn": 0.3, "gcnn-deep": 0.3, "lstm": 0.25}
# Half the experiments' batch of 32 × 64 tokens (twice the updates in the same passes), validated
# every 400 steps (as often per token as every 200 at 32): ptb-recipe's tied-deep8-b16-20, and so
# gcnn-deep's training. (train settings, its --quick version)
HALF_BATCH = ({"global_batch_size": 16, "validate_every": 400}, {"global_batch_size": 2})
PTB_TRAIN = {"gcnn-deep": HALF_BATCH}
# (key, label, preset, the paper's model it is set against)
PTB_MODELS = (("gcnn", "GCNN (gcnn-ptb)", "gcnn-ptb", "gcnn"),
              ("gcnn-deep", "GCNN, 8 blocks, tied embeddings (gcnn-ptb-deep)", "gcnn-ptb-deep", "gcnn"),
              ("lstm", "LSTM (lstmp-ptb)", "lstmp-ptb", "lstm"))


def ptb_variants(quick):
    quick_overrides = {"gcnn": dict(QUICK_MODEL, blocks=[[[4, 16]]] * 2),
                       "gcnn-deep": dict(QUICK_MODEL, blocks=[[[4, 16]]] * 3),
                       "lstm": {"embedding_dim": 16, "layers": [{"type": "lstm", "units": 32, "projection": 16}]}}
    out = {}
    for key, label, preset, paper in PTB_MODELS:
        overrides = quick_overrides[key] if quick else {}
        out[key] = {"label": label, "preset": preset, "overrides": dict(overrides, dropout=PTB_DROPOUT[key]),
                    "epochs": PTB_EPOCHS[key], "minutes": None, "anneal": PTB_FINAL_FRACTION, "paper": paper}
        if key in PTB_TRAIN:
            out[key]["train"] = PTB_TRAIN[key][bool(quick)]
    return out


class PTBSentence(CurvesExperiment):
    def after(self, key, variant, record, settings, log):
        """The best checkpoint's test perplexity, each sentence alone (the paper's protocol) and as
        one stream, in float32 and after a round trip through the float16 file that ships."""
        import numpy as np

        import zoo
        from zoo.data.corpus import read_lines
        from zoo.weights import save_float16

        best = os.path.join(record["run_dir"], "best")
        lines = read_lines(settings["data"], "test")
        out = {"test_lines": len(lines)}
        model = zoo.load(best)
        out["test_sentence"] = model.perplexity(lines, mode="sentence")
        out["test_stream"] = model.perplexity(lines, mode="stream")
        half = os.path.join(record["run_dir"], f"{variant['preset']}.weights.h5")
        save_float16(os.path.join(best, "model.weights.h5"), half)
        overrides = dict(variant["overrides"])
        if settings["quick"]:  # the small corpus's own vocabulary
            overrides["vocabulary_size"] = len(model.tokenizer)
        shipped = zoo.load(variant["preset"], weights=half, **overrides)
        if settings["quick"]:
            shipped.tokenizer = model.tokenizer
        elif shipped.tokenizer != model.tokenizer:
            raise RuntimeError("The trained model's vocabulary is not the treebank's default one.")
        out["float16_test_sentence"] = shipped.perplexity(lines, mode="sentence")
        out["float16_test_stream"] = shipped.perplexity(lines, mode="stream")
        out["float16_bytes"] = os.path.getsize(half)
        out["float32_bytes"] = os.path.getsize(os.path.join(best, "model.weights.h5"))
        out["float16_max_abs_weight_change"] = float(max(np.max(np.abs(a - b)) for a, b in
                                                         zip(model.get_weights(), shipped.get_weights())))
        out["float16_file"] = half if not settings["quick"] else None
        log(f"  [{self.NAME} {key}] test perplexity, each sentence alone: {out['test_sentence']:.2f} "
            f"(float16: {out['float16_test_sentence']:.2f}); as one stream: {out['test_stream']:.2f}; "
            f"float16 weights {out['float16_bytes'] / 1e6:.1f} MB")
        return out

    def figures(self, settings, units):
        out = []
        for key in settings["variants"]:
            u = units[key]
            out.append(figure(f"test-sentence/{key}", f"{u['label']}: test perplexity, each sentence alone (§5)",
                              u["test_sentence"], PTB_PAPER[settings["variants"][key]["paper"]], steps=u["steps"],
                              params=u["params"]))
            out.append(figure(f"test-sentence-float16/{key}", f"{u['label']}, shipped float16 weights: test "
                              "perplexity, each sentence alone", u["float16_test_sentence"],
                              PTB_PAPER[settings["variants"][key]["paper"]]))
            out.append(figure(f"test-stream/{key}", f"{u['label']}: test perplexity, one stream", u["test_stream"]))
            out.append(figure(f"val/{key}", f"{u['label']}: best validation perplexity (stream)",
                              u["best_val_perplexity"]))
            out.append(figure(f"minutes/{key}", f"{u['label']}: training time", u["seconds"] / 60, unit="min"))
            out.append(figure(f"float16-size/{key}", f"{u['label']}: shipped float16 weights",
                              u["float16_bytes"] / 1e6, unit="MB"))
        return out

    def extras(self, settings, units):
        variants = settings["variants"]
        notes = [
            "Protocol: each test sentence is scored alone from <s> to </s> (`model.perplexity(lines, "
            "mode=\"sentence\")`), as in §5; the stream figure scores the test set as one text.",
            "Training: " + "; ".join(
                f"{units[k]['label']} {variants[k]['epochs']:g} passes over the training text "
                f"({units[k]['steps']:,} steps of {t['global_batch_size']} × {t['seq_len']} tokens, validated every "
                f"{t['validate_every']}, {units[k]['seconds'] / 60:.1f} minutes at "
                f"{units[k]['tokens_per_second']:,.0f} tokens/s on "
                f"{units[k].get('device') or 'this machine'}), dropout {variants[k]['overrides']['dropout']:g}"
                for k in variants for t in [variant_train(settings, variants[k])])
            + ". The passes are fixed, not the minutes, which are those each run took on this machine (a shared "
            "host whose speed varies from day to day: compare the tokens/s). Adam from "
            f"2e-3, the learning rate falling along a cosine to {PTB_FINAL_FRACTION:g} of it over the planned steps, "
            "the global norm clipped to 1; the best validation checkpoint is the one scored.",
            "Distance to the paper: " + ", ".join(
                f"{units[k]['label']} {units[k]['test_sentence']:.1f} vs {PTB_PAPER[variants[k]['paper']]} "
                f"({units[k]['test_sentence'] / PTB_PAPER[variants[k]['paper']]:.2f}×)" for k in variants) + ".",
            "The shipped weights are float16 (" + ", ".join(
                f"{units[k]['float16_bytes'] / 1e6:.1f} MB" for k in variants)
            + "); `zoo.load(NAME, weights=\"trained\")` loads them.",
        ]
        imported = [units[k]["label"] for k in variants if units[k].get("measured_by")]
        if imported:
            notes.append("Trained by another experiment's run of the same model with the same schedule and training "
                         "settings, whose record is copied here (`measured_by` in the unit): " + "; ".join(imported) + ".")
        return {"notes": notes}

    def plot(self, result, path):
        units = result["units"]

        def marks(fig, axes):
            for i, key in enumerate(result["settings"]["variants"]):
                u = units[key]
                axes[1].plot([u["steps"]], [u["test_sentence"]], marker="*", markersize=12,
                             color=COLOURS[i % len(COLOURS)], linestyle="none",
                             label=f"{u['label']}: test, sentence level {u['test_sentence']:.1f}")
            axes[1].legend(fontsize=8, loc="best")

        plot_curves(result, path, f"{self.PAPER}: GCNN and LSTM, curves on the validation set, stars on the test set",
                    paper_lines=[(PTB_PAPER[k], f"paper {k.upper()} test {PTB_PAPER[k]}") for k in PTB_PAPER], extra=marks)


PTB_SENTENCE = PTBSentence(
    "ptb-sentence", "the Penn Treebank at the paper's protocol (§5): sentence-level test perplexity of gcnn-ptb, "
    "gcnn-ptb-deep (8 blocks, tied embeddings) and lstmp-ptb (an LSTM of gcnn-ptb's size), each trained a fixed number of passes over "
    f"the text ({PTB_EPOCHS['gcnn']}) with the learning rate annealed; their weights ship as the trained presets",
    "Dauphin et al. 2016, §5, Penn Treebank", ptb_variants, None, validate_every=200)



# ---- ptb-recipe: what each choice of the GCNN's treebank recipe buys ----------------------------
DEEP8 = [[[4, 128]]] * 8  # 8 blocks of kernel 4: receptive field 25 tokens (gcnn-ptb: 4 blocks, 13)
# gcnn-ptb's optimiser keeping a moving average of the weights, which validation and best/ use
AVERAGED = {**PTB_OPTIMIZER, "use_ema": True, "ema_momentum": 0.999}
# (key, label, overrides, passes, the variant it adds one choice to)
RECIPE_STEPS = (
    ("base-4", "gcnn-ptb (dropout 0.3), 4 passes", {"dropout": 0.3}, 4, None),
    ("tied-4", "+ tied input and output embeddings, 4 passes", {"dropout": 0.3, "tie_embeddings": True}, 4, "base-4"),
    ("tied-embdrop-4", "+ embedding dropout 0.2, 4 passes",
     {"dropout": 0.3, "tie_embeddings": True, "embedding_dropout": 0.2}, 4, "tied-4"),
    ("base-8", "gcnn-ptb (dropout 0.3), 8 passes", {"dropout": 0.3}, 8, "base-4"),
    ("deep8-8", "8 blocks (receptive field 25), 8 passes", {"dropout": 0.3, "blocks": DEEP8}, 8, "base-8"),
    ("base-20", "gcnn-ptb (dropout 0.3), 20 passes", {"dropout": 0.3}, 20, "base-8"),
    ("deep8-20", "8 blocks (receptive field 25), 20 passes", {"dropout": 0.3, "blocks": DEEP8}, 20, "base-20"),
    ("tied-deep8-20", "+ tied input and output embeddings, 20 passes",
     {"dropout": 0.3, "blocks": DEEP8, "tie_embeddings": True}, 20, "deep8-20"),
    ("tied-deep8-ema-20", "+ weight averaging (moving average, momentum 0.999), 20 passes",
     {"dropout": 0.3, "blocks": DEEP8, "tie_embeddings": True, "optimizer": AVERAGED}, 20, "tied-deep8-20"),
    ("tied-deep8-ema-drop4-20", "+ dropout 0.4 instead of 0.3, 20 passes",
     {"dropout": 0.4, "blocks": DEEP8, "tie_embeddings": True, "optimizer": AVERAGED}, 20, "tied-deep8-ema-20"),
    ("tied-deep8-drop2-20", "+ dropout 0.2 instead of 0.3, 20 passes",
     {"dropout": 0.2, "blocks": DEEP8, "tie_embeddings": True}, 20, "tied-deep8-20"),
    ("tied-deep8-b16-20", "+ batches of 16 × 64 tokens instead of 32 × 64 (twice the updates), 20 passes",
     {"dropout": 0.3, "blocks": DEEP8, "tie_embeddings": True}, 20, "tied-deep8-20"),
)
# Variants trained with other settings than the experiment's batch of 32 × 64 tokens validated
# every 200 steps.
RECIPE_TRAIN = {"tied-deep8-b16-20": HALF_BATCH}


def recipe_variants(quick):
    out = {}
    for key, label, overrides, passes, before in RECIPE_STEPS:
        if quick:
            overrides = dict(overrides, embedding_dim=16, blocks=[[[4, 16]]] * (3 if "blocks" in overrides else 2))
        out[key] = {"label": label, "preset": "gcnn-ptb", "overrides": overrides, "epochs": passes,
                    "minutes": None, "anneal": PTB_FINAL_FRACTION, "before": before}
        if key in RECIPE_TRAIN:
            out[key]["train"] = RECIPE_TRAIN[key][bool(quick)]
    return out


class PTBRecipe(CurvesExperiment):
    def figures(self, settings, units):
        out = []
        for key, variant in settings["variants"].items():
            u = units[key]
            out.append(figure(f"val/{key}", f"{u['label']}: best validation perplexity", u["best_val_perplexity"],
                              steps=u["steps"], params=u["params"], tokens_per_second=u["tokens_per_second"],
                              minutes=u["seconds"] / 60))
            if variant["before"] is not None:
                before = units[variant["before"]]
                out.append(figure(f"change/{key}", f"{u['label']}: change from {before['label']}",
                                  u["best_val_perplexity"] / before["best_val_perplexity"] - 1, unit="fraction"))
        return out

    def extras(self, settings, units):
        out = super().extras(settings, units)
        out["notes"].insert(0, "Each variant changes one thing from the one it names; every run trains the passes its "
                            "label gives over the treebank's training text with Adam from 2e-3 on a cosine to 2% over "
                            "them (ptb-sentence's schedule, shortened), so a change is what that choice buys at that "
                            "budget.")
        own = [f"{units[k]['label']} (batch {t['global_batch_size']} × {t['seq_len']}, validated every "
               f"{t['validate_every']} steps)" for k, v in settings["variants"].items() if v.get("train")
               for t in [variant_train(settings, v)]]
        if own:
            out["notes"].append("With their own batch and validation interval (the same validations per token; the "
                                "updates panel counts their steps): " + "; ".join(own) + ".")
        paired = [units[k]["label"] for k in settings["variants"] if units[k].get("threads") == 1]
        if paired:
            out["notes"].append("Trained two at a time on the 2 cores, one thread each (so their minutes are not "
                                "comparable with the others'; their perplexities, by steps, are): " + "; ".join(paired) + ".")
        return out

    def plot(self, result, path):
        # y_max: the averaged runs validate near-initial weights for their first passes (thousands)
        plot_curves(result, path, "gcnn-ptb's recipe, one choice at a time: validation perplexity on the Penn Treebank",
                    paper_lines=[(PTB_PAPER["gcnn"], f"paper GCNN test {PTB_PAPER['gcnn']}")], y_max=400)


PTB_RECIPE = PTBRecipe(
    "ptb-recipe", "what each choice of the GCNN's treebank recipe buys: gcnn-ptb with tied embeddings and embedding "
    "dropout added one at a time (4 annealed passes), with 8 blocks instead of 4 (8 and 20 passes), and the 8-block "
    "model with tied embeddings, then weight averaging and dropout 0.4 on it (20 passes); validation perplexity",
    "Dauphin et al. 2016, §5 (the GCNN's treebank figure): ablations of our recipe", recipe_variants, None,
    validate_every=200)

EXPERIMENTS = (PTB_SENTENCE, PTB_RECIPE)
