"""`zoo.convert.fairseq` against fairseq's own outputs (zoo/convert/testdata, written by
tools/convert/make_fairseq_goldens.py with fairseq's FConvDecoder and AdaptiveSoftmax): both
published architectures at reduced width, both torch formats, both adaptive-softmax formats."""

import os
import pickle
import zipfile

import numpy as np
import pytest

import zoo
from zoo.convert import fairseq

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")
DICT = os.path.join(TESTDATA, "dict.txt")
CASES = ["wikitext103", "gbw", "wikitext103_2018", "gbw_2018"]


def zoo_ids(ids):
    """fairseq's ids as the zoo's: <s> (0) and <pad> (1) swap, every other id stays."""
    ids = np.array(ids)
    swapped = ids.copy()
    swapped[ids == 0], swapped[ids == 1] = 1, 0
    return swapped


@pytest.mark.ci
@pytest.mark.parametrize("fmt", [".pt", ".legacy.pt"])
@pytest.mark.parametrize("case", CASES)
def test_log_probs_and_greedy_decoding_equal_fairseqs(tmp_path, case, fmt):
    golden = np.load(os.path.join(TESTDATA, f"{case}.npz"))
    model = fairseq.convert(os.path.join(TESTDATA, case + fmt), DICT, tmp_path / "preset")
    assert model.adaptive_softmax_2018 == case.endswith("_2018")
    tokens = zoo_ids(golden["tokens"])
    log_probs = model.log_probs(tokens)
    targets = np.take_along_axis(log_probs[:, :-1], tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(targets, golden["log_probs"], atol=1e-4, rtol=0)
    prompt = zoo_ids(golden["prompt"])
    steps = golden["greedy"].shape[1]
    continued = np.array(model.generate(prompt.tolist(), steps, sampler="greedy", stop=None))
    np.testing.assert_array_equal(continued[:, prompt.shape[1]:], zoo_ids(golden["greedy"]))


def test_the_preset_directory_loads_with_fairseqs_words_and_scores(tmp_path):
    golden = np.load(os.path.join(TESTDATA, "gbw_2018.npz"))
    fairseq.convert(os.path.join(TESTDATA, "gbw_2018.legacy.pt"), DICT, tmp_path / "preset")
    model = zoo.load(str(tmp_path / "preset"))
    tokenizer = getattr(model, "tokenizer", None) or model.vocabulary
    # every word of dict.txt has fairseq's id (4 + its line), </s> and <unk> too
    assert tokenizer.encode("w00 w59 zzz", add_bos=False) == [4, 63, 3, 2]
    tokens = zoo_ids(golden["tokens"])
    targets = np.take_along_axis(model.log_probs(tokens)[:, :-1], tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(targets, golden["log_probs"], atol=1e-4, rtol=0)


def test_decoder_layers_are_parsed_without_eval_and_grouped_into_blocks():
    layers = fairseq.parse_layers("[(32, 5)] + [(8, 1, 0), (8, 5, 0), (32, 1, 3)] * 2 + [(16, 4, 0)]")
    assert layers == [(32, 5, 1)] + [(8, 1, 0), (8, 5, 0), (32, 1, 3)] * 2 + [(16, 4, 0)]
    blocks, residual, closing = fairseq.group_blocks(layers)
    assert blocks == [[[5, 32]], [[1, 8], [5, 8], [1, 32]], [[1, 8], [5, 8], [1, 32]], [[4, 16]]]
    assert residual == [True, True, True, False] and closing == [0, 3, 6, 7]
    with pytest.raises(ValueError, match="is not a list of"):
        fairseq.parse_layers("__import__('os').system('true')")
    with pytest.raises(ValueError, match="Layer 1 of decoder_layers reaches 3 layers back across another"):
        fairseq.group_blocks([(8, 3, 1), (8, 3, 3)])


# ---- bad input: one sentence each, nothing left in --out --------------------------------------
def _refused(tmp_path, checkpoint, match, dictionary=DICT):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=match):
        fairseq.convert(checkpoint, dictionary, out)
    assert not out.exists() or not os.listdir(out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".convert-")] == []


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path):
    _refused(tmp_path, DICT, "is not a torch checkpoint")


def test_a_truncated_checkpoint_is_refused(tmp_path):
    path = tmp_path / "cut.pt"
    data = open(os.path.join(TESTDATA, "gbw.legacy.pt"), "rb").read()
    path.write_bytes(data[: len(data) // 2])
    _refused(tmp_path, path, "is truncated")


def _rewritten(tmp_path, change):
    """gbw.pt with its data.pkl's bytes changed by `change` (the checkpoint as torch wrote it)."""
    path = tmp_path / "changed.pt"
    with zipfile.ZipFile(os.path.join(TESTDATA, "gbw.pt")) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            target.writestr(item, change(data) if item.filename.endswith("data.pkl") else data)
    return path


def test_another_architecture_is_refused_naming_it(tmp_path):
    path = _rewritten(tmp_path, lambda d: d.replace(b"fconv_lm_dauphin_gbw", b"transformer_lm_gpt2_big"[:20]))
    _refused(tmp_path, path, r"The checkpoint is a fairseq 'transformer_lm_gpt2_' model; only fconv_lm")


def test_a_global_outside_the_allowed_set_is_refused(tmp_path):
    path = _rewritten(tmp_path, lambda d: d.replace(b"cargparse\nNamespace\n", b"cposix\nsystem\nq\x00"[:-2] + b"\n"))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="needs the global posix.system"):
        fairseq.convert(path, DICT, out)
    assert not out.exists()


def test_a_dictionary_of_another_size_is_refused_naming_both_counts(tmp_path):
    short = tmp_path / "dict.txt"
    short.write_text("".join(open(DICT).readlines()[:50]))
    _refused(tmp_path, os.path.join(TESTDATA, "gbw.pt"), r"gives 54 ids \(50 words and 4 specials, 56 padded to a "
             r"multiple of 8\) but the checkpoint's embedding has 64 rows", dictionary=short)


def test_a_short_dictionary_is_padded_with_fairseqs_madeupwords(tmp_path):
    short = tmp_path / "dict.txt"
    short.write_text("".join(open(DICT).readlines()[:57]))  # 61 ids, padded to 64
    model = fairseq.convert(os.path.join(TESTDATA, "gbw.pt"), short, tmp_path / "out")
    tokenizer = getattr(model, "tokenizer", None) or model.vocabulary
    assert tokenizer.tokens[-3:] == ["madeupword0000", "madeupword0001", "madeupword0002"]


def test_an_out_that_holds_a_preset_is_refused(tmp_path):
    out = tmp_path / "out"
    fairseq.convert(os.path.join(TESTDATA, "gbw.pt"), DICT, out)
    before = sorted(os.listdir(out))
    with pytest.raises(ValueError, match="already holds a preset"):
        fairseq.convert(os.path.join(TESTDATA, "gbw.pt"), DICT, out)
    assert sorted(os.listdir(out)) == before


def test_the_command_line_converts_and_refuses_in_one_sentence(tmp_path, capsys):
    from zoo.tools.cli import main

    out = tmp_path / "out"
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "wikitext103.legacy.pt"), "--dictionary", DICT,
                 "--out", str(out)]) == 0
    assert "6 blocks, 64 ids" in capsys.readouterr().out
    assert zoo.load(str(out)).input_projection
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "wikitext103.pt"), "--dictionary", DICT,
                 "--out", str(out)]) == 2
    assert "already holds a preset" in capsys.readouterr().err


def test_the_published_wikitext103_layers_are_gcnn_14s_blocks():
    from zoo.models.gcnn_presets import PRESETS

    layers = fairseq.parse_layers(fairseq.ARCHITECTURES["fconv_lm_dauphin_wikitext103"]["decoder_layers"])
    blocks, residual, _ = fairseq.group_blocks(layers)
    assert blocks == PRESETS["gcnn-14"]["config"]["blocks"] and all(residual)
    gbw = fairseq.parse_layers(fairseq.ARCHITECTURES["fconv_lm_dauphin_gbw"]["decoder_layers"])
    blocks, residual, _ = fairseq.group_blocks(gbw)
    assert len(blocks) == 14 and all(residual) and [len(b) for b in blocks] == [1] + [3] * 13


def test_a_missing_checkpoint_or_dictionary_is_one_sentence_and_nothing_is_written(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"^The checkpoint '.*nope\.pt' is not a file; give fairseq's .pt checkpoint and its dict\.txt\.$"):
        fairseq.convert(str(tmp_path / "nope.pt"), str(tmp_path / "dict.txt"), str(out))
    assert not out.exists()
