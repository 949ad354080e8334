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


def test_raw_text_trains_with_a_learned_subword_vocabulary_end_to_end(tmp_path):
    data = raw_corpus(tmp_path / "raw")
    out = str(tmp_path / "run")
    log = []
    model, history = train("gcnn-ptb", data=data, out_dir=out, log=log.append, overrides=TINY,
                           config=TrainConfig(steps=8, steps_per_epoch=4, global_batch_size=4, seq_len=16,
                                              vocabulary_size=320))
    tokenizer = model.vocabulary
    assert tokenizer.kind == "subword" and len(tokenizer) == 320 == model.vocabulary_size
    assert any(line.startswith("Learned a subword vocabulary of 320 ids") for line in log)
    # per-word perplexity is printed and recorded beside the per-token one, and is higher
    # (more tokens than words: the same total NLL over fewer words)
    assert all(h["val_perplexity_per_word"] > h["val_perplexity"] for h in history)
    assert any("per word" in line for line in log if line.startswith("epoch"))
    best = zoo.load(os.path.join(out, "best"))
    assert best.vocabulary == tokenizer
    text = "Juliet greets TYBALT tonight."
    scores = best.score(text)[0]
    assert len(scores) == len(text.split()) + 1  # one score per word, and </s>
    pieces = best.score([tokenizer.encode(text)])[0]
    np.testing.assert_allclose(scores.sum(), pieces.sum(), rtol=1e-5)  # words are sums of their pieces
    generated = best.generate("Romeo", max_length=8, seed=0)
    assert generated.startswith("Romeo") and "\u2581" not in generated and "<0x" not in generated


def test_a_corpus_too_small_for_the_default_size_gets_the_most_it_supplies(tmp_path):
    data = raw_corpus(tmp_path / "raw", lines=60)
    log = []
    model, _ = train("gcnn-ptb", data=data, out_dir=str(tmp_path / "run"), log=log.append, overrides=TINY,
                     config=TrainConfig(steps=1, global_batch_size=2, seq_len=8))
    size = len(model.vocabulary)
    assert size < DEFAULT_SUBWORD_SIZE
    assert any(f"too small for the default {DEFAULT_SUBWORD_SIZE:,} subword ids; using {size:,}" in line
               for line in log)


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


def test_fine_tuning_a_saved_model_keeps_its_tokenizer(tmp_path):
    data = raw_corpus(tmp_path / "raw")
    config = TrainConfig(steps=2, global_batch_size=4, seq_len=16, vocabulary_size=320)
    first, _ = train("gcnn-ptb", data=data, out_dir=str(tmp_path / "first"), log=lambda m: None,
                     overrides=TINY, config=config)
    new_text = raw_corpus(tmp_path / "new", seed=1)
    preset = os.path.join(str(tmp_path / "first"), "final")
    again, _ = train(preset, data=new_text, out_dir=str(tmp_path / "second"), log=lambda m: None,
                     config=TrainConfig(steps=2, global_batch_size=4, seq_len=16))
    assert again.vocabulary == first.vocabulary
    with pytest.raises(ValueError, match="reads subword ids with its own saved tokenizer"):
        train(preset, data=new_text, out_dir=str(tmp_path / "third"), log=lambda m: None,
              config=TrainConfig(steps=1, global_batch_size=4, seq_len=16, tokenizer="word"))
    assert not os.path.exists(tmp_path / "third" / "final")


def test_keras_fit_fine_tunes_a_saved_subword_model_with_its_tokenizer(tmp_path):
    # docs/data-and-tokenizers.md's fine-tuning example: zoo.load restores the tokenizer, fit runs on new text.
    data = raw_corpus(tmp_path / "raw")
    train("gcnn-ptb", data=data, out_dir=str(tmp_path / "run"), log=lambda m: None, overrides=TINY,
          config=TrainConfig(steps=2, global_batch_size=4, seq_len=16, vocabulary_size=320))
    lm = zoo.load(str(tmp_path / "run" / "final"))
    lm.compile()
    lines = zoo.data.read_lines(raw_corpus(tmp_path / "new", seed=2), "train")
    ds = zoo.data.stream_dataset(lines, lm.vocabulary, batch_size=4, seq_len=16, shuffle=True)
    before = lm.perplexity(lines[:40], per="word")
    lm.fit(ds, epochs=2, verbose=0)
    assert lm.perplexity(lines[:40], per="word") < before
    tuned = lm.save_to_preset(str(tmp_path / "tuned"))
    assert zoo.load(tuned).vocabulary == lm.vocabulary
