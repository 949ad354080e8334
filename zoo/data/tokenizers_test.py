"""The tokenizer family (zoo.data.tokenizers): the SentencePiece subword tokenizer on awkward text,
its id order, word indices, files and refusals, and the word / character vocabularies behind the
same interface, in Python and in the graph."""

import collections
import json
import os
import random
import re
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

import zoo

from zoo.data import CharTokenizer, SubwordTokenizer, WordTokenizer, load_tokenizer, normalize_subword
from zoo.data.tokenizers import CONFIG_FILE, MODEL_FILE

WORDS = ("the cat sat on a mat . The Cat , said she ; running jumped quickly over lazy dogs ! "
         "\"Hello,\" world's end? Café naïve Кириллица тоже 中文 mañana (yes) 1984 well-known").split()
SIZE = 400


SYLLABLES = "ka lo mi ne su ta ri po de bu ven gar stro ph ing er".split()


def corpus(n=300, seed=0, words=WORDS, endings=("", "", "", ",", ".")):
    """`n` lines of `words` (Zipf-like) and invented ones (capitalised, ending in one of `endings`)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(words))]

    def word():
        if rng.random() < 0.7:
            return rng.choices(words, weights)[0]
        made = "".join(rng.choices(SYLLABLES, k=rng.randint(1, 4)))
        return (made.capitalize() if rng.random() < 0.2 else made) + rng.choice(list(endings))

    return [" ".join(word() for _ in range(rng.randint(3, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def subword():
    return SubwordTokenizer.train(corpus(), SIZE)


HARD = {
    "empty": "",
    "whitespace only": " \t\n\u3000 ",
    "emoji": "😀🎉 emoji 👩‍👩‍👧 flags 🇫🇷",
    "CJK": "中文字符测试 日本語のテキスト 한국어",
    "Cyrillic": "Кириллица тоже, ёлка!",
    "combining marks": "cafe\u0301 caf\u00e9 A\u030a e\u0301\u0323",
    "right to left": "עברית ערבית مرحبا بالعالم",
    "long word": "x" * 20000,
    "invalid UTF-8": b"\xff\xfe bad \xc3 bytes \xed\xa0\x80 caf\xe9",
    "NUL and controls": "\x00nul a\x01b \x7f",
    "odd whitespace": "a\u00a0b\u2028c\x1cd\x1fe\u0085f\u200ag tab\tsep  double\r\n",
    "lead and trail": "   lead and trail  ",
    "boundary mark": "a\u2581b \u2581 \u2581\u2581c",
    "reserved names": "<s> </s> <pad> <unk> <0xE2> ▁the",
}


def one_sentence(message, *names):
    assert re.fullmatch(r"[^\n]+\.", message), message
    assert not re.search(r"\.\s+[A-Z]", message.rstrip(".").replace("e.g.", "")), message
    for name in names:
        assert name in message, (name, message)


# ---- normalisation and round trips ----------------------------------------------------------
def test_normalize_is_nfc_and_collapsed_whitespace():
    assert normalize_subword("  cafe\u0301\u00a0 \u2028x\t") == "caf\u00e9 x"
    assert normalize_subword(b"a\xffb") == "a\ufffdb"
    assert normalize_subword("a\u2581b") == "a b"  # SentencePiece would give the mark back as a space
    for text in HARD.values():
        if isinstance(text, str):
            want = " ".join(unicodedata.normalize("NFC", text).replace("\u2581", " ").split())
            assert normalize_subword(text) == want


@pytest.mark.parametrize("name", list(HARD))
def test_round_trip_without_unknown_ids(subword, name):
    text = HARD[name]
    ids = subword.encode(text)
    assert ids[0] == subword.bos_id and ids[-1] == subword.eos_id
    assert subword.unk_id not in ids
    assert all(3 <= i < len(subword) for i in ids[1:-1])
    assert subword.decode(ids) == subword.normalize(text)
    assert "\u2581" not in subword.decode(ids)
    assert ("<0x" in subword.decode(ids)) == ("<0x" in subword.normalize(text))  # typed in, not a byte
    assert subword.encode(text, add_bos=False, add_eos=False) == ids[1:-1]


def test_graph_ids_equal_python_ids(subword):
    graph = subword.graph
    texts = list(HARD.values())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(text):
        return graph.encode(text)

    @tf.function
    def decode(ids):
        return graph.decode(ids)

    want = subword.encode_batch(texts)
    got = encode(tf.constant(texts)).to_list()
    assert got == [ids[1:-1] for ids in want]
    # with <s> / </s> / <pad> in them, ragged and dense, decode drops them as Python does
    back = decode(tf.ragged.constant(want)).numpy().tolist()
    assert [b.decode("utf-8") for b in back] == [subword.normalize(t) for t in texts]
    dense = decode(tf.ragged.constant(want[:4]).to_tensor(0)).numpy().tolist()
    assert [b.decode("utf-8") for b in dense] == [subword.normalize(t) for t in texts[:4]]
    ids = tf.constant([[3, 4, 1, len(subword) - 1], [-1, len(subword), 2, 0]])
    assert graph.token_texts(ids).numpy().astype(str).tolist() == [
        subword.token_texts([3, 4, 1, len(subword) - 1]), ["", "", "</s>", "<pad>"]]


def test_a_batch_encodes_each_line_alone(subword):
    texts = list(HARD.values())
    assert subword.encode_batch(texts) == [subword.encode(t) for t in texts]
    assert subword.encode_batch([]) == []


# ---- the id order ---------------------------------------------------------------------------
def test_ids_sorted_by_count_on_the_training_lines(subword):
    lines = corpus()
    counts = collections.Counter(i for ids in subword.encode_batch(lines, add_bos=False, add_eos=False)
                                 for i in ids)
    per_id = np.array([counts.get(i, 0) for i in range(3, len(subword))])
    assert counts.most_common(1)[0][0] == 3
    assert np.all(np.diff(per_id) <= 0)
    assert np.array_equal(per_id, subword.counts)
    assert subword.unk_id == len(subword) - 1 and subword.token_texts([subword.unk_id]) == ["<unk>"]
    # ties in SentencePiece's order (<unk>, SentencePiece's id 0, aside), and both maps agree
    order = subword.id_to_sentencepiece[3:]
    counts_, order_ = per_id[:-1], order[:-1]
    tied = counts_[:-1] == counts_[1:]
    assert tied.any() and np.all(order_[:-1][tied] < order_[1:][tied])
    assert np.array_equal(subword.sentencepiece_to_id[order], np.arange(3, len(subword)))
    assert len(subword) == SIZE and subword.token_texts([0, 1, 2]) == ["<pad>", "<s>", "</s>"]


def test_token_texts_are_readable(subword):
    texts = subword.token_texts(range(len(subword)))
    assert not any("\u2581" in t for t in texts)
    byte_texts = [t for t, i in zip(texts, subword.id_to_sentencepiece) if i >= 0 and subword._sp.is_byte(int(i))]
    assert len(byte_texts) == 256 and "\\xe2" in byte_texts and "A" in byte_texts
    assert subword.token_texts(subword.encode("the cat", add_bos=False, add_eos=False)) == [" the", " cat"]


# ---- word indices ---------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "the cat sat .", "The Cat, said she; \"Hello,\" world's end?",
    "Unbelievableness quickly-jumped", "中文字符 Кириллица", "x  y\tz", "",
])
def test_word_index_groups_pieces_into_whitespace_words(subword, line):
    ids = subword.encode(line)
    index = subword.word_index(ids)
    words = line.split()
    assert index[0] == -1 and index[-1] == len(words)
    assert index[1:-1] == sorted(index[1:-1]) and set(index[1:-1]) == set(range(len(words)))
    for k, word in enumerate(words):
        pieces = [ids[j] for j in range(len(ids)) if index[j] == k]
        assert subword.decode(pieces) == word


def test_word_index_of_a_word_in_several_pieces(subword):
    ids = subword.encode("Unbelievableness, cat")
    assert len(ids) > 5  # a word the corpus never had comes in several pieces
    assert subword.token_texts(ids[-3:]) == [",", " cat", "</s>"]
    assert subword.word_index(ids) == [-1] + [0] * (len(ids) - 3) + [1, 2]  # the comma is word 0's


# ---- files ----------------------------------------------------------------------------------
def test_save_and_load(subword, tmp_path):
    path = subword.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [CONFIG_FILE, MODEL_FILE] and path.endswith(CONFIG_FILE)
    loaded = load_tokenizer(str(tmp_path))
    assert isinstance(loaded, SubwordTokenizer) and loaded == subword and loaded is not subword
    texts = list(HARD.values())
    assert loaded.encode_batch(texts) == subword.encode_batch(texts)
    assert np.array_equal(loaded.counts, subword.counts)
    other = SubwordTokenizer.train(corpus(seed=1), SIZE)
    assert other != subword


def _saved(subword, tmp_path):
    subword.save(str(tmp_path))
    return tmp_path / CONFIG_FILE, tmp_path / MODEL_FILE


def test_a_missing_model_file(subword, tmp_path):
    config, model = _saved(subword, tmp_path)
    model.unlink()
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(model), "missing")


def test_a_changed_model_file(subword, tmp_path):
    config, model = _saved(subword, tmp_path)
    model.write_bytes(model.read_bytes()[:-10])
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(model), "SHA-256")


def test_a_model_file_that_is_not_sentencepiece(subword, tmp_path):
    config, model = _saved(subword, tmp_path)
    import hashlib

    model.write_bytes(b"not a model")
    data = json.loads(config.read_text())
    data["model_sha256"] = hashlib.sha256(b"not a model").hexdigest()
    config.write_text(json.dumps(data))
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(model), "not a SentencePiece model")


@pytest.mark.parametrize("damage, words", [
    (lambda d: "{not json", "not readable JSON"),
    (lambda d: json.dumps({**d, "order": d["order"][:-1] + d["order"][:1]}), "permutation"),
    (lambda d: json.dumps({**d, "vocabulary_size": d["vocabulary_size"] + 1}), "disagree"),
    (lambda d: json.dumps({**d, "format_version": 99}), "format_version"),
    (lambda d: json.dumps({k: v for k, v in d.items() if k != "order"}), "keys"),
    (lambda d: json.dumps([1, 2]), "keys"),
])
def test_a_corrupt_config_file(subword, tmp_path, damage, words):
    config, model = _saved(subword, tmp_path)
    config.write_text(damage(json.loads(config.read_text())))
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(config), words)


def test_no_tokenizer_files(tmp_path):
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(tmp_path / "vocabulary.txt"), "missing")
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path / "nowhere"))
    one_sentence(str(e.value), str(tmp_path / "nowhere"), "does not exist")
    (tmp_path / "vocabulary.txt").write_text("a\nb\n")
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(tmp_path))
    one_sentence(str(e.value), str(tmp_path / "vocabulary.txt"), "not a vocabulary")


# ---- refusals -------------------------------------------------------------------------------
def test_vocabulary_size_too_small_names_the_smallest():
    lines = corpus()
    with pytest.raises(ValueError) as e:
        SubwordTokenizer.train(lines, 100)
    one_sentence(str(e.value), "vocabulary_size=100", "smallest accepted")
    smallest = int(re.search(r"smallest accepted is (\d+)", str(e.value)).group(1))
    assert smallest > 3 + 256 + 1
    assert len(SubwordTokenizer.train(lines, smallest)) == smallest
    with pytest.raises(ValueError, match=f"smallest accepted is {smallest}"):
        SubwordTokenizer.train(lines, smallest - 1)
    with pytest.raises(ValueError, match=f"smallest accepted is {smallest}"):
        SubwordTokenizer.train(lines, 0)


def test_vocabulary_size_too_large_names_the_largest():
    lines = corpus(100)
    with pytest.raises(ValueError) as e:
        SubwordTokenizer.train(lines, 100_000)
    one_sentence(str(e.value), "vocabulary_size=100000", "largest it accepts")
    largest = int(re.search(r"largest it accepts is (\d+)", str(e.value)).group(1))
    assert len(SubwordTokenizer.train(lines, largest)) == largest


@pytest.mark.parametrize("lines", [[], ["", "  ", "\t\u3000"]])
def test_an_empty_corpus(lines):
    with pytest.raises(ValueError) as e:
        SubwordTokenizer.train(lines, SIZE)
    one_sentence(str(e.value), "empty corpus")


# ---- one interface for every kind -----------------------------------------------------------
def _tokenizers(subword):
    lines = corpus()
    return {"word": WordTokenizer.build(lines), "char": CharTokenizer.build(lines), "subword": subword}


KNOWN = ["the cat sat on a mat .", "The Cat , said she ;", "  running   jumped\tquickly ", ""]


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_every_kind_has_the_interface(subword, kind, tmp_path):
    tokenizer = _tokenizers(subword)[kind]
    assert tokenizer.kind == kind
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2)
    assert tokenizer.token_texts([0, 1, 2]) == ["<pad>", "<s>", "</s>"]
    for line in KNOWN:
        ids = tokenizer.encode(line)
        assert ids[0] == 1 and ids[-1] == 2 and tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == tokenizer.normalize(line)
        joined = ("" if kind != "word" else " ").join(tokenizer.token_texts(ids[1:-1]))
        assert joined.strip() == tokenizer.normalize(line)  # a subword piece's space leads
        index = tokenizer.word_index(ids)
        words = tokenizer.normalize(line).split()
        assert index[0] == -1 and index[-1] == len(words) and len(index) == len(ids)
        assert set(index[1:-1]) == set(range(len(words)))
    assert tokenizer.encode_batch(KNOWN) == [tokenizer.encode(line) for line in KNOWN]
    assert tokenizer.encode(b"the \xff cat") == tokenizer.encode("the \ufffd cat")
    tokenizer.save(str(tmp_path))
    loaded = load_tokenizer(str(tmp_path))
    assert loaded == tokenizer and type(loaded) is type(tokenizer) and len(loaded) == len(tokenizer)


def test_word_and_char_keep_their_classes_and_normalisation():
    assert issubclass(CharTokenizer, WordTokenizer) and (WordTokenizer.kind, CharTokenizer.kind) == ("word", "char")
    word, char = WordTokenizer.build(["a b"]), CharTokenizer.build(["a b"])
    assert word.normalize("  a \t b\u00a0") == "a b"
    assert char.normalize("  a \t b\u00a0") == "a  b"  # inner spaces kept, other whitespace dropped
    assert char.decode(char.encode("  a \t b\u00a0")) == "a  b"
    ids = char.encode("ab  b")  # a b ▁ ▁ b: the spaces belong to the next word
    assert char.word_index(ids) == [-1, 0, 0, 1, 1, 1, 2]
    assert char.token_texts(ids) == ["<s>", "a", "b", " ", " ", "b", "</s>"]
    assert word.word_index(word.encode("a zzz b")) == [-1, 0, 1, 2, 3]


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_graph_tokenizer_survives_a_saved_model(subword, kind, tmp_path):
    tokenizer = _tokenizers(subword)[kind]
    graph = tokenizer.graph
    root = tf.Module()
    root.resources = graph.resources
    root.encode = tf.function(lambda text: graph.encode(text).to_tensor(-1),
                              input_signature=[tf.TensorSpec([None], tf.string)])
    root.decode = tf.function(lambda ids: graph.decode(ids),
                              input_signature=[tf.TensorSpec([None, None], tf.int32)])
    tf.saved_model.save(root, str(tmp_path / "saved"))
    assert not os.path.exists(tmp_path / "saved" / "assets" / "vocabulary.txt")  # the vocabulary is in the graph
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    # the awkward list too (empty, whitespace only, emoji, CJK, Cyrillic, combining marks,
    # right to left, a 20,000-character word, bytes that are not UTF-8): the reloaded graph's
    # ids are the Python ids exactly, and for a subword model never <unk>
    texts = KNOWN + ["Кириллица 中文 😀", ""] + list(HARD.values())
    want = [ids[1:-1] for ids in tokenizer.encode_batch(texts)]
    got = [[i for i in row if i != -1] for row in loaded.encode(tf.constant(texts)).numpy().tolist()]
    assert got == want
    if kind == "subword":
        assert all(tokenizer.unk_id not in ids for ids in got)
    padded = tf.ragged.constant([[1] + w + [2] for w in want]).to_tensor(0)
    back = [b.decode("utf-8") for b in loaded.decode(padded).numpy().tolist()]
    assert back == [tokenizer.decode([1] + w + [2]) for w in want]
    if kind == "subword":
        assert back == [tokenizer.normalize(t) for t in texts]


@pytest.mark.parametrize("add_bos, add_eos", [(True, True), (False, True), (True, False), (False, False)])
def test_encode_batch_with_and_without_specials(subword, add_bos, add_eos):
    texts = ["the cat", "", "Кириллица 😀", " "]
    got = subword.encode_batch(texts, add_bos, add_eos)
    bodies = [ids[1:-1] for ids in subword.encode_batch(texts)]
    assert got == [[1] * add_bos + body + [2] * add_eos for body in bodies]
    assert got == [subword.encode(t, add_bos, add_eos) for t in texts]


def test_training_on_awkward_text():
    lines = corpus(200) + [t for t in HARD.values() if t != HARD["long word"]] * 3
    tokenizer = SubwordTokenizer.train(lines, SIZE, character_coverage=1.0)
    for text in HARD.values():
        ids = tokenizer.encode(text)
        assert tokenizer.unk_id not in ids and tokenizer.decode(ids) == tokenizer.normalize(text)
    assert tokenizer.encode("\x00nul")[1:3] != tokenizer.encode("\ufffdnul")[1:3]


def test_lines_of_200k_characters_are_learned_from_not_skipped():
    """One document per line, each far longer than the 16,384 bytes SentencePiece takes: every
    line is cut at whitespace for the trainer, so the words that occur only in the long lines
    become pieces of their own (skipped, they would be spelt piece by piece)."""
    from zoo.data.tokenizers import trainer_sentences

    rng = random.Random(0)
    long_words = ["strophingerkaloming", "quarnelbastivon", "meltrovianskope", "ulbrechtaminovar"]
    documents = [" ".join(rng.choice(long_words + WORDS) for _ in range(40_000))[:200_000] for _ in range(12)]
    assert all(len(d) >= 199_000 for d in documents)
    short = corpus(200)  # short lines without the long words
    tokenizer = SubwordTokenizer.train(short + documents, 400)
    summary = tokenizer.training_summary
    assert summary["lines"] == 212 and summary["long_lines"] == 12
    assert summary["words"] == sum(len(line.split()) for line in short + documents)
    assert summary["sampled_words"] == summary["words"] and summary["sampled_sentences"] == summary["sentences"]
    skipped = SubwordTokenizer.train(short, 400)  # what the trainer saw when it skipped long lines
    for word in long_words:  # learned from the long lines: one or two pieces, not spelt out
        assert len(tokenizer.encode(word, add_bos=False, add_eos=False)) <= 2, word
        assert len(skipped.encode(word, add_bos=False, add_eos=False)) >= 5, word
    assert tokenizer.decode(tokenizer.encode(documents[0])) == tokenizer.normalize(documents[0])
    # the cut itself: pieces within the limit, every word kept in order, an over-long word cut
    sentences, cut = trainer_sentences([documents[0]], 100)
    assert cut == 1 and all(len(s) <= 100 for s in sentences) and len(sentences) > 2000
    assert " ".join(sentences).split() == documents[0].split()
    assert trainer_sentences(["a b", "x" * 25 + " yy"], 10) == (["a b", "x" * 10, "x" * 10, "xxxxx yy"], 1)


def test_a_sample_of_many_sentences_is_drawn_with_the_seed_and_said():
    lines = corpus(600)
    a = SubwordTokenizer.train(lines, 400, input_sentence_size=200)
    assert a.training_summary["sampled_sentences"] == 200 and a.training_summary["sentences"] == 600
    assert a.training_summary["sampled_words"] < a.training_summary["words"]
    assert a == SubwordTokenizer.train(lines, 400, input_sentence_size=200)


# ---- extension (SubwordTokenizer.extend) ---------------------------------------------------------
TECHNICAL = ["kubectl apply --namespace prod -f deployment.yaml", "kubectl get pods --namespace prod",
             "set CONFIG_PATH=/etc/zoo/config.yaml and restart zoo-serverd", "zoo-serverd: 0x7fff0000 segfault"] * 25


@pytest.fixture(scope="module")
def extended(subword):
    lines = []
    return subword.extend(TECHNICAL, 12, log=lines.append) + (lines,)


def test_extend_adds_pieces_of_the_text_after_the_old_ids(subword, extended):
    tokenizer, replaced, log = extended
    assert len(tokenizer) == len(subword) + 12 and tokenizer.added_pieces == 12 and len(replaced) == 12
    assert tokenizer.pieces[:len(subword)] == subword.pieces  # old ids keep their pieces
    assert tokenizer.unk_id == subword.unk_id
    new = tokenizer.pieces[len(subword):]
    assert not set(new) & set(subword.pieces)
    for piece, spelling in zip(new, replaced):
        # each new piece is spelt by the old pieces listed, which are more than one
        assert len(spelling) > 1 and max(spelling) < len(subword)
        assert subword.decode(spelling) == piece.replace("\u2581", " ").strip()
    assert len(log) == 1 and log[0].startswith("Added 12 pieces, e.g. ")
    # the text is now shorter, and decodes as before
    before = sum(len(ids) for ids in subword.encode_batch(TECHNICAL))
    after = sum(len(ids) for ids in tokenizer.encode_batch(TECHNICAL))
    assert after < 0.8 * before
    assert [tokenizer.decode(ids) for ids in tokenizer.encode_batch(TECHNICAL)] == [
        subword.normalize(line) for line in TECHNICAL]


def test_text_without_new_pieces_is_split_as_before(subword, extended):
    tokenizer = extended[0]
    lines = corpus(200, seed=5) + list(HARD.values())
    kept = [line for line in lines if max(tokenizer.encode(line)) < len(subword)]
    assert len(kept) > 100
    assert tokenizer.encode_batch(kept) == subword.encode_batch(kept)


def test_extended_tokenizer_saves_loads_and_runs_in_the_graph(subword, extended, tmp_path):
    tokenizer = extended[0]
    tokenizer.save(str(tmp_path))
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["added_pieces"] == 12
    loaded = load_tokenizer(str(tmp_path))
    assert loaded == tokenizer and loaded.added_pieces == 12
    graph = tokenizer.graph
    lines = TECHNICAL[:4] + ["the cat sat"]
    ids = graph.encode(tf.constant(lines))
    assert ids.to_list() == [x[1:-1] for x in tokenizer.encode_batch(lines)]


def test_extend_refuses_twice_a_bad_count_and_too_many_ids(subword, extended):
    from zoo.data.tokenizers import MAX_IDS

    with pytest.raises(ValueError) as e:
        extended[0].extend(TECHNICAL, 5)
    one_sentence(str(e.value), "extended already", "12")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError) as e:
            subword.extend(TECHNICAL, bad)
        one_sentence(str(e.value), "at least 1", repr(bad))
    for empty in ([], [" ", "\t\u3000"]):
        with pytest.raises(ValueError) as e:
            subword.extend(empty, 5)
        one_sentence(str(e.value), "no text to learn new pieces from")
    with pytest.raises(ValueError) as e:
        subword.extend(TECHNICAL, MAX_IDS)
    one_sentence(str(e.value), "int32", f"{MAX_IDS - len(subword):,}")
    # one string (a folder's name, a whole text) would be read a character at a time
    for text in ("my_text/", "\n".join(TECHNICAL), os.path.join("my", "text.txt").encode()):
        with pytest.raises(ValueError) as e:
            subword.extend(text, 5)
        one_sentence(str(e.value), "must be the text's lines", "read_lines", type(text).__name__)
    with pytest.raises(ValueError) as e:
        SubwordTokenizer.train("the cat sat on the mat", 40)
    one_sentence(str(e.value), "must be the text's lines", "'the cat sat on the mat'")
    word = WordTokenizer.build(["the cat sat"])
    for build in (WordTokenizer.build, CharTokenizer.build,
                  lambda text: zoo.data.stream_dataset(text, word, 2, 4),
                  lambda text: zoo.data.sentence_dataset(text, word, 2)):
        with pytest.raises(ValueError) as e:
            build("the cat sat")
        one_sentence(str(e.value), "must be the text's lines", "not one str: 'the cat sat'")


def test_a_text_with_no_new_piece_keeps_the_tokenizer(subword):
    log = []
    same, replaced = subword.extend(["the cat sat on a mat"] * 30, 10, log=log.append)
    assert same is subword and replaced == []
    assert log == ["The training text yields no piece that the tokenizer lacks: it is kept as it is."]


def python_unfinished(byte_values):
    """The oracle: how many of the last bytes begin a UTF-8 character they do not finish."""
    continuations = 0
    for k, value in enumerate(reversed(byte_values[-4:])):
        if value < 0x80:
            return 0
        if value < 0xC0:
            continuations += 1
            continue
        length = 2 if value < 0xE0 else 3 if value < 0xF0 else 4 if value < 0xF8 else 1
        return k + 1 if continuations + 1 < length else 0
    return 0


def test_unfinished_characters_counts_a_cut_utf8_character():
    """A text that generation stopped inside a character ends with byte pieces that begin it:
    `whole_characters` leaves those out instead of writing U+FFFD. The graph's count agrees with
    a plain Python reading of UTF-8 on every combination of kinds of bytes."""
    import itertools

    from zoo.data.graph_tokenizers import unfinished_characters

    def unfinished(row):
        return int(unfinished_characters(tf.constant([([-1] * 4 + row)[-4:]], tf.int32))[0])

    assert unfinished([-1, 0xE3]) == 1  # a 3-byte character's lead byte alone
    assert unfinished([0xE3, 0x81]) == 2
    assert unfinished([0xE3, 0x81, 0x82]) == 0  # あ, whole
    assert unfinished([0xF0, 0x9F, 0x98]) == 3  # 3 of an emoji's 4 bytes
    assert unfinished([0xC3]) == 1 and unfinished([0xC3, 0xA9]) == 0  # é
    assert unfinished([0x81, 0x81]) == 0  # continuations without a lead: not UTF-8, kept
    assert unfinished([0xE3, 0xE3]) == 1  # the first is no character whatever follows; the last is cut
    assert unfinished([0xE3, 0x81, 0x81, 0x81]) == 0  # too many continuations: not UTF-8, kept
    assert unfinished([0xE3, 0x41]) == 0 and unfinished([]) == 0
    kinds = [-1, 0x41, 0x80, 0xBF, 0xC3, 0xE3, 0xF0, 0xF8]
    rows = [list(r) for r in itertools.product(kinds, repeat=4)]
    got = unfinished_characters(tf.constant(rows, tf.int32)).numpy().tolist()
    assert got == [python_unfinished(r) for r in rows]


def test_whole_characters_leaves_out_a_cut_character_as_the_graph_does(subword):
    graph = subword.graph
    byte = {value: i for i, value in enumerate(subword.byte_values.tolist()) if value >= 0}
    assert len(byte) == 256  # byte fallback: a piece for every byte
    a, the = subword.encode("a", add_bos=False, add_eos=False), subword.encode("the", add_bos=False, add_eos=False)
    rows = [the + [byte[0xE3]], the + [byte[0xE3], byte[0x81], byte[0x82]], [byte[0xF0], byte[0x9F], byte[0x98]],
            a + [byte[0xC3], byte[0xA9], 2, 0], the + [byte[0x81]], [], [byte[0xE3]] + a]
    want = ["the", "theあ", "", "aé", "the\ufffd", "", "\ufffd a"]
    assert [subword.decode(r, whole_characters=True) for r in rows] == want
    assert subword.decode(rows[0]) == "the\ufffd"  # without: the cut character as U+FFFD
    got = graph.decode(tf.ragged.constant(rows, tf.int32), whole_characters=True).numpy().tolist()
    assert [g.decode("utf-8") for g in got] == want
    assert graph.decode(tf.ragged.constant(rows[:1], tf.int32)).numpy()[0].decode() == "the\ufffd"
    int32_splits = tf.ragged.constant(rows, tf.int32, row_splits_dtype=tf.int32)  # before: an AddV2 dtype error
    assert [g.decode() for g in graph.decode(int32_splits, whole_characters=True).numpy().tolist()] == want
    dense = tf.ragged.constant(rows[:2], tf.int32).to_tensor(0)  # <pad> after the first row's end: dropped
    assert [g.decode() for g in graph.decode(dense, whole_characters=True).numpy().tolist()] == want[:2]
