"""The plot of a training-curve experiment (tools/reproduce/curve_plot.py) from made-up curves:
a variant's own training settings, the labels (parameters, divergence) and axis titles, and a PNG
written."""

from tests.reproduce_checks import PNG_SIGNATURE, fake_record
from zoo.tools.reproduce import curve_plot


def test_a_variants_train_entries_replace_the_experiments():
    settings = {"train": {"global_batch_size": 20, "seq_len": 35, "steps": 100}}
    assert curve_plot.variant_train(settings, {"train": {"global_batch_size": 64}}) == \
        {"global_batch_size": 64, "seq_len": 35, "steps": 100}
    assert curve_plot.variant_train(settings, {"label": "plain"}) == settings["train"]


def result():
    units = {"a": fake_record("adam", 120.0), "b": fake_record("sgd", 150.0, diverged={"step": 51, "seconds": 30.0})}
    return {"units": units, "quick": False, "machine": {"cores": 2},
            "settings": {"quick": False, "train": {"global_batch_size": 20, "seq_len": 35},
                         "variants": {"a": {}, "b": {"train": {"global_batch_size": 20}}}}}


def test_the_plot_is_a_png_whose_labels_name_the_variants_and_the_units(tmp_path):
    seen = {}

    def extra(fig, axes):
        seen["xlabels"] = [ax.get_xlabel() for ax in axes]
        seen["labels"] = [line.get_label() for line in axes[1].get_lines() if not line.get_label().startswith("_")]

    path = tmp_path / "curves.png"
    curve_plot.plot_curves(result(), str(path), "made-up", paper_lines=[(100.0, "paper")], extra=extra)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert seen["xlabels"] == ["training time [minutes on CPU (2 cores), validation included]",
                               "updates [steps of 20 × 35 tokens]"]
    assert seen["labels"][0] == "adam (0.00M params)" and seen["labels"][1].endswith(", diverged at step 51")
