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
TREEBANK = ("gcnn-ptb", "gcnn-ptb-deep", "lstmp-ptb")  # trained by `zoo reproduce ptb-sentence`


def shipped_units():
    """`{preset: its ptb-sentence unit}` for every preset with trained weights."""
    with open(RESULT) as f:
        result = json.load(f)
    return {result["settings"]["variants"][key]["preset"]: unit for key, unit in result["units"].items()}


def test_the_treebank_presets_ship_trained_weights_of_a_few_megabytes():
    assert set(sources.TRAINED) == {"gcnn-ptb", "gcnn-ptb-deep", "lstmp-ptb", "gcnn-en", "gcnn-moe-en"}
    units = shipped_units()
    for preset in TREEBANK:
        path = sources.TRAINED[preset].path
        size = os.path.getsize(os.path.join(sources.PACKAGE_DIR, path))
        assert size == units[preset]["float16_bytes"] and size < 8e6


@pytest.mark.ci  # scores the whole treebank test set
@pytest.mark.parametrize("preset", TREEBANK)
def test_trained_weights_score_the_test_set_at_the_stated_figure(preset):
    model = zoo.load(preset, weights="trained")
    lines = read_lines("ptb", "test")
    ppl = model.perplexity(lines, mode="sentence")
    stated = shipped_units()[preset]["float16_test_sentence"]
    assert ppl == pytest.approx(stated, rel=1e-4)


@pytest.mark.parametrize("preset", TREEBANK)
def test_the_pages_state_the_measured_figure(preset):
    stated = number(shipped_units()[preset]["float16_test_sentence"], "ppl")
    pages = {page: open(os.path.join(ROOT, page), encoding="utf-8").read()
             for page in ("RESULTS.md", "README.md", "docs/presets.md")}
    assert "| " + stated + " |" in pages["RESULTS.md"]
    for page in ("README.md", "docs/presets.md"):  # the preset tables' status column
        assert f"`{preset}`" in pages[page] and stated in pages[page], page


@pytest.mark.ci
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
    assert cli.main(["generate", "gcnn-ptb", "the company", "--max-new-tokens", "6", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip() == model.generate("the company", max_new_tokens=6, temperature=0)
    assert cli.main(["export", "lstmp-ptb", "--base", str(tmp_path / "exports")]) == 0
    assert os.path.isfile(tmp_path / "exports" / "lstmp-ptb" / "1" / "saved_model.pb")
    assert cli.main(["score", "gcnn-9", "the cat"]) == 2
    assert ("a preset with trained weights (gcnn-en, gcnn-moe-en, gcnn-ptb, gcnn-ptb-deep, lstmp-ptb)"
            in capsys.readouterr().err)


# ---- gcnn-en: the open-vocabulary English preset, shipped as a preset directory ----------------

def card(preset="gcnn-en"):
    """The model card's figures of a preset shipped as a preset directory (results/PRESET.json)."""
    with open(os.path.join(ROOT, "results", f"{preset}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("preset, megabytes", [("gcnn-en", 25), ("gcnn-moe-en", 60)])
def test_the_english_presets_ship_their_preset_directory_in_float16(preset, megabytes):
    import h5py
    import numpy as np

    from zoo import preset_directory, registry

    directory = sources.trained_source(preset)
    files = {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}
    assert files == card(preset)["file_bytes"]
    assert set(files) == {"config.json", "model.weights.h5", "tokenizer.json", "tokenizer.model"}
    assert sum(files.values()) <= megabytes * 1e6
    with h5py.File(os.path.join(directory, "model.weights.h5")) as f:
        kinds = set()
        f.visititems(lambda name, item: kinds.add(item.dtype) if isinstance(item, h5py.Dataset) else None)
    assert kinds == {np.dtype(np.float16)}
    class_name, config = preset_directory.read_config(directory)
    registered = registry.get_preset(preset)
    assert class_name == "GCNNLanguageModel" == registered.model_class.__name__
    assert {k: config[k] for k in registered.config} == json.loads(json.dumps(registered.config))  # as registered


@pytest.mark.ci
def test_gcnn_en_loads_by_name_with_its_tokenizer_and_gives_the_card_s_figures():
    """The probe of the model card (tools/reproduce/model_card.py), measured on these very weights:
    its per-word perplexity on a fixed text and its greedy continuations."""
    from zoo.data.tokenizers import SubwordTokenizer

    model = zoo.load("gcnn-en", weights="trained")
    assert isinstance(model.tokenizer, SubwordTokenizer) and len(model.tokenizer) == 16_000
    assert model.count_params() == card()["params"]
    probe = card()["probe"]
    assert model.perplexity(probe["text"], mode="sentence", per="word") == pytest.approx(probe["per_word"], rel=1e-4)
    assert model.generate(probe["prompts"], max_new_tokens=probe["max_length"], sampler="greedy", stop=None) == probe["greedy"]
    # an open vocabulary: a word it never saw is spelled out, not <unk>, and costs more than a common one
    rare, common = model.score(["The quokka sat.", "The cat sat."])
    assert rare[1] < common[1] and model.perplexity(["The quokka sat."], per="word").unknown_share is None


@pytest.mark.parametrize("preset", ["gcnn-en", "gcnn-moe-en"])
def test_the_pages_state_the_english_presets_test_figure(preset):
    stated = f"{card(preset)['figures']['test']['per_word']:.1f}"
    for page in ("README.md", "docs/presets.md", f"docs/models/{preset}.md"):
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        assert f"`{preset}`" in text and stated in text, page


# ---- gcnn-moe-en: gcnn-en's network with a sparse mixture of 64 experts --------------------------

def test_gcnn_moe_en_has_gcnn_en_s_tokenizer_file():
    # the same corpus and settings learn the same SentencePiece model
    with open(os.path.join(sources.trained_source("gcnn-moe-en"), "tokenizer.model"), "rb") as a, \
            open(os.path.join(sources.trained_source("gcnn-en"), "tokenizer.model"), "rb") as b:
        assert a.read() == b.read()


@pytest.mark.ci
def test_gcnn_moe_en_gives_the_card_s_figures_and_fine_tunes_with_factored_experts():
    import numpy as np

    model = zoo.load("gcnn-moe-en", weights="trained")
    assert model.count_params() == card("gcnn-moe-en")["params"]
    probe = card("gcnn-moe-en")["probe"]
    assert model.perplexity(probe["text"], mode="sentence", per="word") == pytest.approx(probe["per_word"], rel=1e-4)
    assert model.generate(probe["prompts"], max_new_tokens=probe["max_length"], sampler="greedy", stop=None) == probe["greedy"]
    # fine-tuning: the preset's fine-tuning optimiser, the factorised Adam, factors the experts alone
    model.compile()
    optimizer = model.optimizer
    assert type(optimizer).__name__ == "FactorizedAdam"
    lines = ["The quokka is a small marsupial of Western Australia."] * 8
    ids = np.array([model.tokenizer.encode(line)[:12] for line in lines])
    before = model.evaluate(ids[:, :-1], ids[:, 1:], verbose=0)
    model.fit(ids[:, :-1], ids[:, 1:], batch_size=8, epochs=3, verbose=0)
    assert model.evaluate(ids[:, :-1], ids[:, 1:], verbose=0) < before
    factored = sorted(v.path.rsplit("/", 1)[-1] for v in model.trainable_variables if optimizer.uses_factored_state(v))
    assert factored == ["expert_kernel_in", "expert_kernel_out"]
