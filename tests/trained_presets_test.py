"""The trained presets that ship (`zoo.weights.TRAINED`): each scores the Penn Treebank's test set,
each sentence alone, at the figure results/ptb-sentence.json and RESULTS.md state, and works
through `zoo score`, `zoo generate` and the export from the installed package alone."""

import json
import os

import pytest

import zoo
from zoo import weights as sources
from zoo.data import read_lines
from zoo.tools import cli
from zoo.tools.reproduce.results import number

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(ROOT, "results", "ptb-sentence.json")


def shipped_units():
    """`{preset: its ptb-sentence unit}` for every preset with trained weights."""
    with open(RESULT) as f:
        result = json.load(f)
    return {result["settings"]["variants"][key]["preset"]: unit for key, unit in result["units"].items()}


def test_the_treebank_presets_ship_trained_weights_of_a_few_megabytes():
    assert set(sources.TRAINED) == {"gcnn-ptb", "lstmp-ptb"}
    units = shipped_units()
    for preset, (path, _) in sources.TRAINED.items():
        size = os.path.getsize(os.path.join(sources.PACKAGE_DIR, path))
        assert size == units[preset]["float16_bytes"] and size < 8e6


@pytest.mark.ci  # scores the whole treebank test set
@pytest.mark.parametrize("preset", ["gcnn-ptb", "lstmp-ptb"])
def test_trained_weights_score_the_test_set_at_the_stated_figure(preset):
    model = zoo.load(preset, weights="trained")
    lines = read_lines("ptb", "test")
    ppl = model.perplexity(lines, mode="sentence")
    stated = shipped_units()[preset]["float16_test_sentence"]
    assert ppl == pytest.approx(stated, rel=1e-4)


@pytest.mark.parametrize("preset", ["gcnn-ptb", "lstmp-ptb"])
def test_the_pages_state_the_measured_figure(preset):
    stated = number(shipped_units()[preset]["float16_test_sentence"], "ppl")
    pages = {page: open(os.path.join(ROOT, page), encoding="utf-8").read()
             for page in ("RESULTS.md", "README.md", "docs/presets.md")}
    assert "| " + stated + " |" in pages["RESULTS.md"]
    for page in ("README.md", "docs/presets.md"):  # the preset tables' status column
        assert f"`{preset}`" in pages[page] and stated in pages[page], page


def test_trained_presets_score_generate_and_export_by_name_from_the_command_line(capsys, tmp_path):
    # README.md's 30-second win runs `zoo score gcnn-ptb "..."`
    model = zoo.load("gcnn-ptb", weights="trained")
    # a trained model prefers a sentence to its words reversed
    good, bad = model.score(["the company said it expects to report a loss",
                             "loss a report to expects it said company the"])
    assert sum(good) > sum(bad) + 10
    assert cli.main(["score", "gcnn-ptb", "the company said it expects to report a loss"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{sum(good):.4f}\t")
    assert cli.main(["generate", "gcnn-ptb", "the company", "--max-length", "6", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip() == model.generate("the company", max_length=6, temperature=0)
    assert cli.main(["export", "lstmp-ptb", "--base", str(tmp_path / "exports")]) == 0
    assert os.path.isfile(tmp_path / "exports" / "lstmp-ptb" / "1" / "saved_model.pb")
    assert cli.main(["score", "gcnn-9", "the cat"]) == 2
    assert "a preset with trained weights (gcnn-ptb, lstmp-ptb)" in capsys.readouterr().err
