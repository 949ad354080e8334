"""ptb-sentence and ptb-recipe (experiments/ptb_sentence.py): each recipe variant changes one thing,
and annealing changes training unless its final fraction is 1. (Their quick runs:
tools/reproduce/curves_test.py.)"""

import pytest

from zoo.tools import reproduce
from zoo.tools.reproduce import curves
from zoo.tools.reproduce.experiments import ptb_sentence


def test_each_ptb_recipe_variant_changes_one_thing_from_the_one_it_names():
    variants = reproduce.experiment("ptb-recipe").settings()["variants"]
    for key, variant in variants.items():
        if variant["before"] is None:
            continue
        before = variants[variant["before"]]
        a, b = before["overrides"], variant["overrides"]
        changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        changed |= {field for field in ("epochs", "preset", "anneal", "train") if before.get(field) != variant.get(field)}
        assert len(changed) == 1, (key, changed)
    # weight averaging is the preset's optimiser keeping a moving average, nothing else
    averaged = variants["tied-deep8-ema-20"]["overrides"]["optimizer"]
    from zoo.registry import get_preset

    assert averaged == dict(get_preset("gcnn-ptb").config["optimizer"], use_ema=True, ema_momentum=0.999)


@pytest.mark.ci  # three short training runs
def test_annealing_changes_training_and_a_final_fraction_of_1_does_not(tmp_path):
    settings = ptb_sentence.PTB_SENTENCE.settings(quick=True)
    final = {}
    for anneal in (None, 1.0, 0.0):
        variant = dict(settings["variants"]["gcnn"], anneal=anneal)
        unit = curves.train_curve("t", "gcnn", variant, settings, str(tmp_path / "run"), lambda *a: None)
        final[anneal] = unit["final_val_perplexity"]
    assert final[1.0] == final[None]
    assert abs(final[0.0] / final[None] - 1) > 1e-4
