"""Which tokenizer `zoo train` learns from a corpus, training on raw text with a subword
vocabulary, the adaptive softmax above the threshold, and fine-tuning a saved model."""

import os

import numpy as np
import pytest

import zoo
from zoo.layers import AdaptiveSoftmax, FullSoftmax
from zoo.training import TrainConfig, train
from zoo.training.data import DEFAULT_SUBWORD_SIZE, choose_tokenizer
from zoo.training.trainer import ADAPTIVE_THRESHOLD

# Raw text as users have it: capitals, punctuation attached to words, a heading, odd Unicode.
NAMES = ["Romeo", "Juliet", "Tybalt", "Mercutio", "Nurse", "Friar"]
VERBS = ["loves", "fears", "greets", "follows", "curses", "forgives"]
ENDINGS = ["tonight.", "in Verona!", "at the ball,", "— alas —", "by the café;", "with «grace»?"]


def raw_corpus(root, lines=240, seed=0):
    rng = np.random.default_rng(seed)
    os.makedirs(root, exist_ok=True)
    for split, n in (("train", lines), ("valid", 24), ("test", 24)):
        text = ["ACT I. SCENE I."] + [
            f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(NAMES).upper()} {rng.choice(ENDINGS)}"
            for _ in range(n)]
        with open(os.path.join(root, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
    return str(root)


TINY = {"embedding_dim": 16, "blocks": [[[3, 16]], [[3, 16]]], "dropout": 0.0}


@pytest.mark.parametrize("data, preset_kind, requested, size, message", [
    ("ptb", "word", "subword", None, "The Penn Treebank's published protocol fixes its word vocabulary"),
    ("ptb", "word", "char", None, "drop --tokenizer char"),
    ("{wiki}", "word", "subword", None, "WikiText's published protocol fixes its word vocabulary"),
    ("{raw}", "word", "word", 500, "--vocabulary-size sets the size of a learned subword vocabulary"),
    ("{raw}", "word", "bytes", None, "Unknown tokenizer 'bytes'; expected one of word, char, subword."),
])
def test_a_tokenizer_flag_the_corpus_does_not_allow_is_refused_in_one_sentence(
        data, preset_kind, requested, size, message, tmp_path):
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "wiki.train.tokens").write_text("a b\n")
    data = data.replace("{wiki}", str(wiki)).replace("{raw}", raw_corpus(tmp_path / "raw"))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("?", r"\?")):
        choose_tokenizer(data, preset_kind, requested, size)


def test_the_default_tokenizer_follows_the_corpus(tmp_path):
    raw = raw_corpus(tmp_path / "raw")
    assert choose_tokenizer("ptb", "word") == "word"
    assert choose_tokenizer(raw, "word") == "subword"
    assert choose_tokenizer(raw, "char") == "char"  # a character preset keeps its characters
    assert choose_tokenizer(raw, "word", "word") == "word"


@pytest.mark.ci
def test_raw_text_trains_with_a_learned_subword_vocabulary_end_to_end(tmp_path):
    data = raw_corpus(tmp_path / "raw")
    out = str(tmp_path / "run")
    log = []
    model, history = train("gcnn-ptb", data=data, out_dir=out, log=log.append, overrides=TINY,
                           config=TrainConfig(steps=8, steps_per_epoch=4, global_batch_size=4, seq_len=16,
                                              vocabulary_size=320))
    tokenizer = model.tokenizer
    assert tokenizer.kind == "subword" and len(tokenizer) == 320 == model.vocabulary_size
    assert any(line.startswith("Learned a subword vocabulary of 320 ids") for line in log)
    # per-word perplexity is printed and recorded beside the per-token one, and is higher
    # (more tokens than words: the same total NLL over fewer words)
    assert all(h["val_perplexity_per_word"] > h["val_perplexity"] for h in history)
    assert any("per word" in line for line in log if line.startswith("epoch"))
    best = zoo.load(os.path.join(out, "best"))
    assert best.tokenizer == tokenizer
    text = "Juliet greets TYBALT tonight."
    scores = best.score(text)[0]
    assert len(scores) == len(text.split()) + 1  # one score per word, and </s>
    pieces = best.score([tokenizer.encode(text)])[0]
    np.testing.assert_allclose(scores.sum(), pieces.sum(), rtol=1e-5)  # words are sums of their pieces
    generated = best.generate("Romeo", max_new_tokens=8, seed=0)
    assert generated.startswith("Romeo") and "\u2581" not in generated and "<0x" not in generated


def test_a_corpus_too_small_for_the_default_size_gets_the_most_it_supplies(tmp_path):
    data = raw_corpus(tmp_path / "raw", lines=60)
    log = []
    model, _ = train("gcnn-ptb", data=data, out_dir=str(tmp_path / "run"), log=log.append, overrides=TINY,
                     config=TrainConfig(steps=1, global_batch_size=2, seq_len=8))
    size = len(model.tokenizer)
    assert size < DEFAULT_SUBWORD_SIZE
    assert any(f"too small for the default {DEFAULT_SUBWORD_SIZE:,} subword ids; using {size:,}" in line
               for line in log)


@pytest.mark.ci
def test_a_large_vocabulary_gets_the_adaptive_softmax_unless_the_head_is_chosen(tmp_path):
    root = tmp_path / "big"
    root.mkdir()
    words = [f"w{i}" for i in range(ADAPTIVE_THRESHOLD + 1_000)]  # distinct words: over the threshold
    lines = [" ".join(words[i:i + 30]) for i in range(0, len(words), 30)]
    for split in ("train", "valid"):
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    log = []
    config = TrainConfig(steps=1, global_batch_size=2, seq_len=8, tokenizer="word")
    model, _ = train("gcnn-ptb", data=str(root), out_dir=str(tmp_path / "a"), log=log.append, overrides=TINY,
                     config=config)
    assert ADAPTIVE_THRESHOLD > 10_002  # the treebank's vocabulary keeps its full softmax
    assert isinstance(model.head, AdaptiveSoftmax) and model.head.cutoffs == [2_000, 10_000]
    assert any("the output layer is an adaptive softmax with cutoffs [2000, 10000]" in line for line in log)
    model, _ = train("gcnn-ptb", data=str(root), out_dir=str(tmp_path / "b"), log=log.append,
                     overrides={**TINY, "cutoffs": None}, config=config)
    assert isinstance(model.head, FullSoftmax)


@pytest.mark.ci
def test_fine_tuning_a_saved_model_keeps_its_tokenizer(tmp_path):
    data = raw_corpus(tmp_path / "raw")
    config = TrainConfig(steps=2, global_batch_size=4, seq_len=16, vocabulary_size=320)
    first, _ = train("gcnn-ptb", data=data, out_dir=str(tmp_path / "first"), log=lambda m: None,
                     overrides=TINY, config=config)
    new_text = raw_corpus(tmp_path / "new", seed=1)
    preset = os.path.join(str(tmp_path / "first"), "final")
    again, _ = train(preset, data=new_text, out_dir=str(tmp_path / "second"), log=lambda m: None,
                     config=TrainConfig(steps=2, global_batch_size=4, seq_len=16))
    assert again.tokenizer == first.tokenizer
    with pytest.raises(ValueError, match="reads subword ids with its own saved tokenizer"):
        train(preset, data=new_text, out_dir=str(tmp_path / "third"), log=lambda m: None,
              config=TrainConfig(steps=1, global_batch_size=4, seq_len=16, tokenizer="word"))
    assert not os.path.exists(tmp_path / "third" / "final")


@pytest.mark.ci
def test_keras_fit_fine_tunes_a_saved_subword_model_with_its_tokenizer(tmp_path):
    # docs/data-and-tokenizers.md's fine-tuning example: zoo.load restores the tokenizer, fit runs on new text.
    data = raw_corpus(tmp_path / "raw")
    train("gcnn-ptb", data=data, out_dir=str(tmp_path / "run"), log=lambda m: None, overrides=TINY,
          config=TrainConfig(steps=2, global_batch_size=4, seq_len=16, vocabulary_size=320))
    lm = zoo.load(str(tmp_path / "run" / "final"))
    lm.compile()
    lines = zoo.data.read_lines(raw_corpus(tmp_path / "new", seed=2), "train")
    ds = zoo.data.stream_dataset(lines, lm.tokenizer, batch_size=4, seq_len=16, shuffle=True)
    before = lm.perplexity(lines[:40], per="word")
    lm.fit(ds, epochs=2, verbose=0)
    assert lm.perplexity(lines[:40], per="word") < before
    tuned = lm.save_to_preset(str(tmp_path / "tuned"))
    assert zoo.load(tuned).tokenizer == lm.tokenizer


@pytest.mark.ci
def test_a_word_model_reports_the_share_of_unk_words_in_its_log_history_and_perplexity(tmp_path, capsys):
    root = tmp_path / "words"
    root.mkdir()
    (root / "train.txt").write_text("the cat sat on the mat\nthe dog sat\n" * 20)
    (root / "valid.txt").write_text("the cow sat on the mat\nthe dog ran <unk>\n")  # 3 of 10 words <unk>
    log = []
    model, history = train("gcnn-ptb", data=str(root), out_dir=str(tmp_path / "run"), log=log.append,
                           overrides=TINY, config=TrainConfig(steps=2, global_batch_size=2, seq_len=8,
                                                              tokenizer="word"))
    assert history[-1]["val_unknown_share"] == 0.3
    assert any(line.startswith("Validation: 30.00% of the words are <unk> (closed vocabulary") for line in log)
    assert any(line.startswith("epoch") and "(30.00% of the words <unk>)" in line for line in log)
    valid = ["the cow sat on the mat", "the dog ran <unk>"]
    ppl = model.perplexity(valid, per="word")
    assert ppl.unknown_share == 0.3 and ppl.per == "word"
    assert repr(ppl) == (f"Perplexity({float(ppl)!r}, per='word', unknown_share=0.3000, bits_per_byte="
                         f"{ppl.bits_per_byte:.4f}, bits_per_character={ppl.bits_per_character:.4f}, "
                         f"worst_words_share={ppl.worst_words_share:.4f})")
    assert model.perplexity(["the cat sat"]).unknown_share == 0.0
    # an open vocabulary has no <unk>: nothing to report
    subword = train("gcnn-ptb", data=raw_corpus(tmp_path / "raw"), out_dir=str(tmp_path / "sub"), log=lambda m: None,
                    overrides=TINY, config=TrainConfig(steps=1, global_batch_size=2, seq_len=8,
                                                       vocabulary_size=320))[0]
    assert subword.perplexity(["Juliet greets TYBALT"], per="word").unknown_share is None
    from zoo.tools import cli

    assert cli.main(["evaluate", str(tmp_path / "run" / "best"), "--data", str(root), "--split", "valid"]) == 0
    out = capsys.readouterr().out
    assert "valid perplexity per word (stream): " in out and "\nvalid words: 30.00% of the words are <unk> (closed" in out


def long_lines(n, chars, seed):
    """`n` lines of about `chars` characters each: words of raw text, odd Unicode among them."""
    rng = np.random.default_rng(seed)
    words = NAMES + VERBS + ENDINGS + ["naïve", "東京", "😀", "Ünïcödé", "x" * 40]
    lines = []
    for _ in range(n):
        line = []
        while sum(map(len, line)) + len(line) < chars:
            line.append(str(rng.choice(words)))
        lines.append(" ".join(line))
    return lines


@pytest.mark.ci
def test_lines_of_200k_characters_train_score_and_export_whole(tmp_path):
    """One document per line, each of 200,000 characters: the tokenizer learns from every line, the
    training log says so, `perplexity` scores every piece of a line, and an export whose
    `max_tokens` covers the line scores it exactly as the model does."""
    import tensorflow as tf

    from zoo.export import export_saved_model

    root = tmp_path / "long"
    root.mkdir()
    train_lines, valid_lines = long_lines(3, 200_000, 0), long_lines(1, 200_000, 1)
    (root / "train.txt").write_text("\n".join(train_lines) + "\n", encoding="utf-8")
    (root / "valid.txt").write_text("\n".join(valid_lines) + "\n", encoding="utf-8")
    log = []
    model, history = train("gcnn-ptb", data=str(root), out_dir=str(tmp_path / "run"), log=log.append, overrides=TINY,
                           config=TrainConfig(steps=2, global_batch_size=4, seq_len=16, vocabulary_size=320))
    words = sum(len(line.split()) for line in train_lines)
    assert any(f"from 3 training lines, {words:,} of their {words:,} words; 3 lines longer than the trainer takes "
               "were cut at whitespace" in line for line in log), log
    assert model.tokenizer.training_summary["long_lines"] == 3
    line = valid_lines[0]
    ids = np.array(model.tokenizer.encode(line))  # <s> pieces </s>
    assert len(ids) > 50_000
    log_probs = model.log_probs(ids[None, :-1])[0]
    total = float(np.take_along_axis(np.asarray(log_probs), ids[1:, None], 1).sum())
    scored = len(line.split()) + 1
    for mode in ("sentence", "stream"):
        assert model.perplexity([line], mode=mode, per="word") == pytest.approx(np.exp(-total / scored), rel=1e-4)
    assert history[-1]["val_perplexity_per_word"] == pytest.approx(np.exp(-total / scored), rel=1e-4)
    path = export_saved_model(model, str(tmp_path / "exports"), "long", max_tokens=len(ids) + 8)
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant([line]))
    assert int(served["lengths"][0]) == scored
    assert float(served["log_prob"][0]) == pytest.approx(total, rel=1e-4)


@pytest.mark.ci
def test_long_lines_each_alone_are_scored_whole_and_sequences_past_the_cap_are_refused():
    """mode="sentence" scores a line of more than LONG_LINE_CHARS alone (windows for a GCNN, one
    sequence for a recurrent model), exactly as the whole line; `score` and `generate` refuse a
    text past MAX_SEQUENCE_TOKENS in one sentence instead of running out of memory."""
    from zoo.data import WordTokenizer
    from zoo.models.inference import LONG_LINE_CHARS, MAX_SEQUENCE_TOKENS

    lines = long_lines(2, LONG_LINE_CHARS + 3_000, 2) + ["Romeo loves Juliet tonight."]
    vocab = WordTokenizer.build(lines)
    for preset, overrides in (("gcnn-ptb", TINY),
                              ("lstm-ptb", {"embedding_dim": 8, "layers": [{"type": "lstm", "units": 8}]})):
        model = zoo.load(preset, weights="random", vocabulary_size=len(vocab), **overrides)
        model.tokenizer = vocab
        total = 0.0
        for line in lines:
            ids = np.array(vocab.encode(line))
            lp = np.asarray(model.log_probs(ids[None, :-1])[0])
            total += float(np.take_along_axis(lp, ids[1:, None], 1).sum())
        words = sum(len(line.split()) + 1 for line in lines)
        assert model.perplexity(lines, mode="sentence", per="word") == pytest.approx(np.exp(-total / words), rel=1e-4)
    too_long = "Romeo " * MAX_SEQUENCE_TOKENS
    with pytest.raises(ValueError, match=r"^text 1 is 262,146 tokens long; texts are read as one sequence of at most "
                                         r"262,144 tokens: split it"):
        model.score(["Romeo", too_long])
    with pytest.raises(ValueError, match=r"^prompt 0 is 262,145 tokens long"):
        model.generate(too_long, max_new_tokens=2)
