"""`zoo.convert.fairseq` against fairseq's own outputs (zoo/convert/testdata, written by
tools/convert/make_fairseq_goldens.py with fairseq's FConvDecoder and AdaptiveSoftmax): both
published architectures at reduced width, both torch formats, both adaptive-softmax formats."""

import os
import zipfile

import numpy as np
import pytest

import zoo
from zoo.convert import fairseq

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")
DICT = os.path.join(TESTDATA, "dict.txt")
CASES = ["wikitext103", "gbw", "wikitext103_2018", "gbw_2018", "plain"]  # plain: fconv_lm, no adaptive softmax


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
    assert (model.output_projection is not None) == (case == "plain")
    tokens = zoo_ids(golden["tokens"])
    log_probs = model.log_probs(tokens)
    targets = np.take_along_axis(log_probs[:, :-1], tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(targets, golden["log_probs"], atol=1e-4, rtol=0)
    # decode_step, one token at a time as fairseq's incremental_state decoding reads them
    state, stepped = None, []
    for t in range(tokens.shape[1] - 1):
        step, state = model.decode_step(tokens[:, t], state)
        stepped.append(np.take_along_axis(np.asarray(step), tokens[:, t + 1, None], -1)[:, 0])
    np.testing.assert_allclose(np.stack(stepped, 1), golden["log_probs"], atol=1e-4, rtol=0)
    prompt = zoo_ids(golden["prompt"])
    steps = golden["greedy"].shape[1]
    continued = np.array(model.generate(prompt.tolist(), steps, sampler="greedy", stop=None))
    np.testing.assert_array_equal(continued[:, prompt.shape[1]:], zoo_ids(golden["greedy"]))


def test_the_preset_directory_loads_with_fairseqs_words_and_scores(tmp_path):
    golden = np.load(os.path.join(TESTDATA, "gbw_2018.npz"))
    fairseq.convert(os.path.join(TESTDATA, "gbw_2018.legacy.pt"), DICT, tmp_path / "preset")
    model = zoo.load(str(tmp_path / "preset"))
    tokenizer = model.tokenizer
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


def test_a_translation_fconv_is_refused_naming_its_architecture(tmp_path):
    _refused(tmp_path, os.path.join(TESTDATA, "translation.pt"),
             r"^The checkpoint is a fairseq 'fconv_iwslt_de_en' model; only fconv_lm language models convert")


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
    tokenizer = model.tokenizer
    assert tokenizer.tokens[-3:] == ["madeupword0000", "madeupword0001", "madeupword0002"]


def test_an_out_that_holds_a_preset_is_refused(tmp_path):
    out = tmp_path / "out"
    fairseq.convert(os.path.join(TESTDATA, "gbw.pt"), DICT, out)
    before = sorted(os.listdir(out))
    with pytest.raises(ValueError, match="already holds a preset"):
        fairseq.convert(os.path.join(TESTDATA, "gbw.pt"), DICT, out)
    assert sorted(os.listdir(out)) == before


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


# ---- text: </s> as the line start, score and perplexity against fairseq's eval_lm -------------
EVAL = os.path.join(TESTDATA, "eval.txt")  # blank lines, tabs, unknown words (odd Unicode too)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The two published architectures at reduced width, 2018 format, as zoo.load reads them."""
    out = {}
    for case in ("wikitext103_2018", "gbw"):
        directory = tmp_path_factory.mktemp(case) / "preset"
        fairseq.convert(os.path.join(TESTDATA, case + ".pt"), DICT, directory)
        out[case] = zoo.load(str(directory))
    return out


@pytest.mark.parametrize("case", ["wikitext103_2018", "gbw"])
def test_stream_perplexity_is_fairseqs_eval_lm_for_each_window_setting(converted, case):
    from zoo.data.corpus import read_file_lines

    golden = np.load(os.path.join(TESTDATA, f"{case}.npz"))
    model = converted[case]
    lines = read_file_lines(EVAL, keep_empty=True)
    assert "" in lines and len(lines) == 40
    receptive = model.stream_context
    for t, c in ((16, 0), (48, 32)):  # eval_lm --tokens-per-sample t --context-window c
        assert c == 0 or c >= receptive  # the settings the zoo's windows score exactly (the docs' mapping)
        ppl = model.perplexity(lines, mode="stream", seq_len=t - c, context=c)
        np.testing.assert_allclose(float(ppl), golden[f"eval_{t}_{c}_perplexity"], rtol=1e-5)
    # the default (the model's own context, its receptive field) is every token scored exactly
    np.testing.assert_allclose(float(model.perplexity(lines)), golden["eval_48_32_perplexity"], rtol=1e-5)
    # --sample-break-mode eos: each line alone, and `score` gives each token's log-probability
    np.testing.assert_allclose(float(model.perplexity(lines, mode="sentence")), golden["eval_eos_perplexity"],
                               rtol=1e-5)
    scores = np.concatenate(model.score(lines))
    np.testing.assert_allclose(scores, golden["eval_eos"], atol=1e-4, rtol=0)


def test_stream_windows_score_each_end_of_line_once_after_one_opening_end_of_line(converted):
    from zoo.data import pipeline

    tokenizer = converted["gbw"].tokenizer
    assert (tokenizer.line_start, tokenizer.bos_id, tokenizer.eos_id) == ("</s>", 2, 2)
    ids = pipeline.stream_ids(["w00 w01", "", "w02"], tokenizer)
    assert ids.tolist() == [2, 4, 5, 2, 2, 6, 2]  # fairseq's stream: a blank line is one </s>
    inputs, targets, weights = pipeline.stream_arrays(["w00 w01", "", "w02"], tokenizer, seq_len=4)
    assert targets[weights > 0].tolist() == [4, 5, 2, 2, 6, 2]
    assert tokenizer.word_index([2, 4, 5, 2]) == [-1, 0, 1, 2]


@pytest.mark.ci  # a preset directory and a SavedModel export (20 s)
def test_the_line_start_round_trips_through_the_preset_directory_and_an_export(converted, tmp_path):
    from zoo.data import WordTokenizer
    from zoo.export import export_saved_model

    model = converted["wikitext103_2018"]
    directory = model.save_to_preset(str(tmp_path / "again"))
    assert open(os.path.join(directory, "vocabulary_line_start.txt")).read() == "</s>\n"
    assert zoo.load(directory).tokenizer == model.tokenizer
    with pytest.raises(ValueError, match=r"line_start must be one of \('<s>', '</s>'\), got '<unk>'"):
        WordTokenizer(model.tokenizer.tokens, line_start="<unk>")
    import tensorflow as tf

    loaded = tf.saved_model.load(export_saved_model(model, str(tmp_path / "export"), "fairseq"))
    served = loaded.signatures["serving_default"](text=tf.constant(["w00 w05 zzz"]))
    expected = model.score(["w00 w05 zzz"])[0]  # </s> w00 w05 <unk> </s>
    np.testing.assert_allclose(served["token_log_probs"].numpy()[0], expected, atol=1e-5)
    generated = loaded.signatures["generate"](text=tf.constant(["w00 w05"]), max_new_tokens=tf.constant(6),
                                              temperature=tf.constant(0.0), top_k=tf.constant(0),
                                              top_p=tf.constant(1.0), seed=tf.constant(0),
                                              num_beams=tf.constant(1))
    assert generated["text"].numpy()[0].decode() == model.generate("w00 w05", 6, sampler="greedy")


def test_zoo_load_takes_a_checkpoint_of_the_presets_architecture_and_names_the_first_other_shape(tmp_path):
    import shutil

    for name in ("wikitext103_2018.legacy.pt", "dict.txt"):
        shutil.copy(os.path.join(TESTDATA, name), tmp_path / name)
    checkpoint = str(tmp_path / "wikitext103_2018.legacy.pt")
    golden = np.load(os.path.join(TESTDATA, "wikitext103_2018.npz"))
    with pytest.raises(ValueError, match=r"is not gcnn-14's architecture: decoder.embed_tokens.weight has shape "
                                         r"\[64, 12\], where gcnn-14 has \[64, 280\]"):
        zoo.load("gcnn-14", weights=checkpoint)
    # a preset whose config its adaptive-softmax options do not fit (no cutoffs): before, "head_bias=False and
    # adaptive_softmax_2018=True are options of an adaptive softmax; give cutoffs too", options nobody gave
    with pytest.raises(ValueError, match=r"is not gcnn-ptb's architecture: decoder.embed_tokens.weight has shape "
                                         r"\[64, 12\], where gcnn-ptb has \[64, 128\]"):
        zoo.load("gcnn-ptb", weights=checkpoint)
    blocks = [[[6, 16]], [[6, 16]], [[1, 16]], [[5, 16]], [[4, 24]], [[4, 32]]]
    with pytest.raises(ValueError, match=r"decoder.convolutions.3.weight_v has shape \[5, 16, 32\], where gcnn-14 "
                                         r"has \[4, 16, 32\]"):
        zoo.load("gcnn-14", weights=checkpoint, embedding_dim=12, cutoffs=[12, 24],
                 blocks=blocks[:3] + [[[4, 16]]] + blocks[4:])
    with pytest.raises(ValueError, match=r"the checkpoint has 6 convolutions, where gcnn-14 has 5"):
        zoo.load("gcnn-14", weights=checkpoint, embedding_dim=12, cutoffs=[12, 24], blocks=blocks[:5])
    model = zoo.load("gcnn-14", weights=checkpoint, embedding_dim=12, cutoffs=[12, 24], blocks=blocks)
    assert model.tokenizer.line_start == "</s>" and model.tokenizer.encode("w00", add_bos=False) == [4, 2]
    tokens = zoo_ids(golden["tokens"])
    targets = np.take_along_axis(model.log_probs(tokens)[:, :-1], tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(targets, golden["log_probs"], atol=1e-4, rtol=0)


@pytest.mark.ci
def test_gcnn_14s_full_size_equals_fairseq(tmp_path):
    """fairseq's fconv_lm_dauphin_wikitext103 at full size (324 million numbers, the published
    checkpoint's 2018 format) with seeded weights drawn again here (tools/convert/seeded_weights.py):
    converted, it is gcnn-14, and its log-probabilities and greedy decoding equal fairseq's."""
    import types

    from zoo.tools.convert import seeded_weights

    golden = np.load(os.path.join(TESTDATA, "gcnn14_full.npz"))
    names = [str(n) for n in golden["names"]]
    shapes = [[int(d) for d in str(s).split(",")] for s in golden["shapes"]]
    args = types.SimpleNamespace(arch="fconv_lm_dauphin_wikitext103", criterion="adaptive_loss", dropout=0.1,
                                 decoder_layers=str(golden["decoder_layers"]),
                                 decoder_embed_dim=int(golden["decoder_embed_dim"]),
                                 adaptive_softmax_cutoff=str(golden["adaptive_softmax_cutoff"]))
    state = seeded_weights.state_dict(int(golden["seed"]), names, shapes)
    model = fairseq.build_model({"args": args, "model": state})
    del state
    assert model.adaptive_softmax_2018 and model.vocabulary_size == 267_744
    import tensorflow as tf

    with tf.Graph().as_default():  # gcnn-14's shapes, nothing allocated
        preset = zoo.registry.build("gcnn-14", **{k: v for k, v in model.get_config().items()
                                                  if k in fairseq.FAIRSEQ_OPTIONS})
        assert fairseq.first_difference(model, preset, "gcnn-14") is None
    tokens = zoo_ids(golden["tokens"])
    targets = model.target_log_probs(tokens[:, :-1], tokens[:, 1:])
    np.testing.assert_allclose(targets, golden["log_probs"], atol=1e-4, rtol=0)
    prompt = zoo_ids(golden["prompt"])
    continued = np.array(model.generate(prompt.tolist(), golden["greedy"].shape[1], sampler="greedy", stop=None))
    np.testing.assert_array_equal(continued[:, prompt.shape[1]:], zoo_ids(golden["greedy"]))


# ---- every entry point reads a converted preset directory --------------------------------------
@pytest.mark.ci
def test_every_entry_point_reads_a_converted_preset(tmp_path, capsys):
    import tensorflow as tf

    from zoo.data import pipeline
    from zoo.tools.cli import main

    golden = np.load(os.path.join(TESTDATA, "wikitext103_2018.npz"))
    directory = str(tmp_path / "converted")
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "wikitext103_2018.legacy.pt"), "--dictionary", DICT,
                 "--out", directory]) == 0
    capsys.readouterr()
    model = zoo.load(directory)
    # zoo evaluate: fairseq's eval_lm --tokens-per-sample 16 --context-window 0, and the exact default
    assert main(["evaluate", directory, "--data", EVAL, "--split", "all", "--keep-empty-lines", "--seq-len", "16",
                 "--context", "0"]) == 0
    assert f"all perplexity (stream): {float(golden['eval_16_0_perplexity']):.2f}" in capsys.readouterr().out
    assert main(["evaluate", directory, "--data", EVAL, "--split", "all", "--keep-empty-lines"]) == 0
    assert f"all perplexity (stream): {float(golden['eval_48_32_perplexity']):.2f}" in capsys.readouterr().out
    # zoo score: each token of the line after </s>, fairseq's sentence scores
    lines = open(EVAL, encoding="utf-8").read().split("\n")
    assert main(["score", directory, lines[0]]) == 0
    first = golden["eval_eos"][: len(lines[0].split()) + 1]
    assert capsys.readouterr().out.startswith(f"{first.sum():.4f}\t{lines[0].split()[0]}:{first[0]:.3f}")
    # zoo generate: greedy, as the model's own generate
    assert main(["generate", directory, "w00 w05", "--max-new-tokens", "5", "--sampler", "greedy"]) == 0
    assert model.generate("w00 w05", 5, sampler="greedy") in capsys.readouterr().out
    # zoo export: the served score is the model's
    assert main(["export", directory, "--base", str(tmp_path / "exports"), "--name", "fs"]) == 0
    capsys.readouterr()
    served = tf.saved_model.load(str(tmp_path / "exports" / "fs" / "1")).signatures["serving_default"](
        text=tf.constant([lines[0]]))
    np.testing.assert_allclose(served["token_log_probs"].numpy()[0], model.score([lines[0]])[0], atol=1e-5)
    # model.fit: the converted weights train (the loss falls on the text it is fitted to)
    data = pipeline.stream_dataset([line for line in lines if line], model.tokenizer, 4, 16)
    before = model.get_weights()[0].copy()
    model.compile()
    history = model.fit(data, epochs=3, verbose=0).history["loss"]
    assert history[-1] < history[0] and not np.array_equal(model.get_weights()[0], before)
    # zoo train --weights DIR: fine-tunes the converted model with its tokenizer, from its weights
    text = tmp_path / "text.txt"
    text.write_text("\n".join(line for line in lines if line) * 3, encoding="utf-8")
    assert main(["train", "--preset", "gcnn-14", "--weights", directory, "--data", str(text), "--out",
                 str(tmp_path / "run"), "--steps", "2", "--seq-len", "16", "--global-batch-size", "4"]) == 0
    tuned = zoo.load(str(tmp_path / "run" / "best"))
    assert tuned.tokenizer == model.tokenizer and tuned.adaptive_softmax_2018 and tuned.input_projection
    start = zoo.load(directory).get_weights()[0]
    change = np.abs(tuned.get_weights()[0] - start).max()
    assert 0 < change < 0.1  # fine-tuned from the converted weights, not trained from new ones
    capsys.readouterr()
    assert main(["train", "--preset", "gcnn-14", "--weights", str(tmp_path / "nowhere"), "--data", str(text),
                 "--out", str(tmp_path / "run2")]) == 2
    assert "weights must be 'trained', 'random' or a preset directory to train from, got '" in capsys.readouterr().err
    assert not (tmp_path / "run2").exists()


def test_a_checkpoint_without_dict_txt_beside_it_loads_without_a_tokenizer_and_says_so(tmp_path, caplog):
    import shutil

    shutil.copy(os.path.join(TESTDATA, "wikitext103_2018.legacy.pt"), tmp_path / "model.pt")
    blocks = [[[6, 16]], [[6, 16]], [[1, 16]], [[5, 16]], [[4, 24]], [[4, 32]]]
    model = zoo.load("gcnn-14", weights=str(tmp_path / "model.pt"), embedding_dim=12, cutoffs=[12, 24], blocks=blocks)
    assert model.tokenizer is None
    assert "model.pt: no dict.txt beside it, so the model has no tokenizer" in caplog.text
