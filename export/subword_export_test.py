"""SavedModel export of a subword (SentencePiece) model: a tiny `SubwordTokenizer` and a tiny GCNN,
exported, then loaded and called in a fresh process that imports only TensorFlow and
tensorflow-text (the repository not even importable):

- `serving_default` answers per word: its `lengths` are the words of the normalised text + 1 and
  its scores equal `model.score(text)` (which sums a word's pieces) on awkward text (empty,
  whitespace only, emoji, CJK, Cyrillic, combining marks, right-to-left, a long word, bytes that
  are not UTF-8); its total equals `score_ids` on the Python ids, so the graph's ids are
  Python's (the model's biases are spread so that any other piece would change the sum);
- over-long lines are cut at a word boundary (the words wholly within the first `max_tokens`
  pieces, no `</s>`);
- `next_token` gives readable pieces (`token_texts`) and the top k of `model.log_probs`;
- `decode_step` streamed equals the in-process `decode_step` and greedy `generate`;
- without tensorflow-text the SavedModel does not load (its ops are needed), and the one-liner
  of docs/serving.md ("Which ops a SavedModel needs") lists them (none for a word model).
"""

import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

import zoo.export as export
from zoo.data.tokenizers import NORMALIZATION, SubwordTokenizer
from zoo.data.tokenizers_test import corpus as made_up_corpus
from zoo.data.vocab import SPECIALS, WordTokenizer
from tests.export_checks import pad

# Every test here needs a whole export first (a module fixture): the capability tier.
pytestmark = pytest.mark.ci

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIGNATURES = ["decode_step", "generate", "next_token", "score_ids", "serving_default"]
SHORT = 10  # max_tokens of the second export, for the cut

WORDS = ("the cat sat on a mat dog ran home big small house tree and of in with under over said "
         "Café naïve Кириллица тоже 中文 mañana well-known 1984 \"quoted\" end.").split()


def corpus(n=400, seed=0):
    return made_up_corpus(n, seed, words=WORDS, endings=("", "", ",", "."))


TEXTS = {
    "plain": "the cat sat on the mat",
    "empty": "",
    "whitespace only": " \t\n\u3000 ",
    "emoji": "😀🎉 emoji 👩‍👩‍👧 flags 🇫🇷",
    "CJK": "中文字符测试 日本語のテキスト 한국어",
    "Cyrillic": "Кириллица тоже, ёлка!",
    "combining marks": "cafe\u0301 caf\u00e9 A\u030a e\u0301\u0323",
    "right to left": "עברית ערבית مرحبا بالعالم",
    "long word": "strophingerkaloming" * 12,
    "over-long word": "x" * 3000,  # more than max_tokens pieces: cut, no word left
    "invalid UTF-8": b"\xff\xfe bad \xc3 bytes \xed\xa0\x80 caf\xe9",
    "odd whitespace": "a\u00a0b\u2028c\x1cd  tab\tsep\r\n",
    "boundary mark": "a\u2581b \u2581 \u2581\u2581c",
    "reserved names": "<s> </s> <pad> <unk> <0xE2> ▁the",
}
PREFIXES = ["the cat", "", "Кириллица то", "the big dog ran to the"]
# the text a tokenizer is extended with (LanguageModel.extend_tokenizer), and lines with and without its pieces
EXTENSION_TEXT = ["kubectl apply --namespace prod -f deployment.yaml", "kubectl get pods --namespace prod",
                  "zoo-serverd: 0x7fff0000 segfault in libzoo.so"] * 30
EXTENDED_TEXTS = EXTENSION_TEXT[:3] + ["the cat sat on the mat", "kubectl and the big dog", "", "Café kubectl 中文"]
K = [5, 3, 40, 1]
PROMPT = "the big cat"
STREAM_LENGTH = 30


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _bytes(value):
    return value if isinstance(value, bytes) else value.encode("utf-8")


@pytest.fixture(scope="module")
def tokenizer():
    tok = SubwordTokenizer.train(corpus(), 400)
    assert len(tok) == 400
    return tok


def subword_model(tiny_model, tokenizer):
    """conftest's tiny GCNN with one block of 16, an adaptive softmax and the subword tokenizer."""
    model = tiny_model("gcnn", tokenizer=tokenizer, blocks=[[[3, 16]]], cutoffs=[60, 200])
    # Biases like a unigram model's (ids are sorted by count) plus noise: every piece has its own
    # log-probability, so a different piece would change a score; </s> made unlikely, so that
    # greedy decoding runs its whole length.
    bias = model.head.head_bias
    rng = np.random.default_rng(0)
    value = -0.03 * np.arange(bias.shape[0]) + rng.normal(0, 1.0, bias.shape[0])
    value[2] -= 8.0
    bias.assign(value.astype("float32"))
    return model


@pytest.fixture(scope="module")
def exported(tokenizer, tmp_path_factory, tiny_model):
    """{name: (model, path, max_tokens)}: one model, exported with the default max_tokens and
    with a short one."""
    base = str(tmp_path_factory.mktemp("exports"))
    model = subword_model(tiny_model, tokenizer)
    extended = model.extend_tokenizer(EXTENSION_TEXT, 12)
    return {
        "subword": (model, export.export_saved_model(model, base, "subword"), export.DEFAULT_MAX_TOKENS),
        "short": (model, export.export_saved_model(model, base, "short", max_tokens=SHORT), SHORT),
        "extended": (extended, export.export_saved_model(extended, base, "extended"), export.DEFAULT_MAX_TOKENS),
    }


# ---- lines for the cut, chosen by their Python pieces ------------------------------------------
def cut_lines(tokenizer):
    """{case: line} for the short export: a line of exactly SHORT pieces (not cut), lines cut
    inside a word and just before a word, and one whose first word alone is longer."""
    rng = random.Random(1)
    pool = [" ".join(rng.choice(WORDS + ["strophing", "kalominebu", "x"]) for _ in range(rng.randint(2, 9)))
            for _ in range(3000)]
    cases = {}
    for line in pool:
        ids = tokenizer.encode(line)
        pieces, index = ids[1:-1], tokenizer.word_index(ids)[1:-1]
        if len(pieces) == SHORT:
            cases.setdefault("exactly max_tokens", line)
        elif len(pieces) > SHORT and index[SHORT] == index[SHORT - 1] and index[SHORT] > 1:
            cases.setdefault("cut inside a word", line)
        elif len(pieces) > SHORT and index[SHORT] != index[SHORT - 1]:
            cases.setdefault("cut before a word", line)
    cases["first word too long"] = "strophingerkaloming" * 3 + " the cat"
    ids = tokenizer.encode(cases["first word too long"])
    assert tokenizer.word_index(ids)[1 + SHORT] == 0  # its first word has more than SHORT pieces
    order = ["exactly max_tokens", "cut inside a word", "cut before a word", "first word too long"]
    assert sorted(cases) == sorted(order), sorted(cases)
    return {case: cases[case] for case in order}


def expected_scores(model, text, max_tokens):
    """The documented answer of serving_default: `model.score(text)`, or for a line of more than
    max_tokens pieces the scores of the words wholly within its first max_tokens pieces."""
    text = _text(text)
    scores = model.score([text])[0]
    ids = model.tokenizer.encode(text)
    if len(ids) - 2 > max_tokens:
        kept = model.tokenizer.word_index(ids)[1 + max_tokens]  # the word of the first dropped piece
        scores = scores[:kept]
    return scores


# ---- the fresh process -------------------------------------------------------------------------
FRESH_PROCESS = r'''
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece and normalisation ops)

plan = json.load(open(sys.argv[1]))
out = {}
for export, p in plan.items():
    sigs = tf.saved_model.load(p["path"]).signatures
    assert sorted(sigs) == ["decode_step", "generate", "next_token", "score_ids", "serving_default"], sorted(sigs)
    texts = tf.constant([bytes.fromhex(h) for h in p["texts"]], tf.string)
    for tag, settings in p.get("generate", {}).items():
        r = sigs["generate"](text=texts, **{k: tf.constant(v) for k, v in settings.items()})
        for key, value in r.items():
            out[f"{export}/generate_{tag}/{key}"] = value.numpy()
    results = [("serving_default", sigs["serving_default"](text=texts))]
    if "ids" in p:
        results += [
            ("score_ids", sigs["score_ids"](token_ids=tf.constant(p["ids"], tf.int32),
                                            lengths=tf.constant(p["lengths"], tf.int32))),
            ("next_token", sigs["next_token"](text=tf.constant(p["prefixes"]), k=tf.constant(p["k"], tf.int32))),
        ]
    for name, r in results:
        for key, value in r.items():
            out[f"{export}/{name}/{key}"] = value.numpy()
    if "decode_ids" not in p:
        continue
    decode = sigs["decode_step"]
    specs = decode.structured_input_signature[1]
    names = sorted(n for n in specs if n != "token_ids")

    def zeros(batch):
        return {n: tf.zeros([batch] + specs[n].shape.as_list()[1:]) for n in names}

    state, steps = zeros(len(p["decode_ids"][0])), []
    for ids in p["decode_ids"]:
        r = decode(token_ids=tf.constant(ids, tf.int32), **state)
        steps.append(r["log_probs"].numpy())
        state = {n: r[n] for n in names}
    out[f"{export}/decode_step/log_probs"] = np.stack(steps, axis=1)
    state = zeros(1)
    for token in p["prompt"]:
        r = decode(token_ids=tf.constant([token], tf.int32), **state)
        state = {n: r[n] for n in names}
    tokens = []
    for _ in range(p["max_length"]):
        lp = r["log_probs"].numpy()[0].astype("float64")
        lp[p["never"]] = -np.inf  # generation.never_emitted: <pad>, <s> and the subword <unk>
        token = int(np.argmax(lp))
        tokens.append(token)
        if token == 2:
            break
        r = decode(token_ids=tf.constant([token], tf.int32), **state)
        state = {n: r[n] for n in names}
    out[f"{export}/stream"] = np.array(tokens)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("zoo", "layers", "export"))
out["project_modules"] = np.array(loaded, dtype=str)
def readable(v):  # string tensors come back as bytes: UTF-8 text
    if v.dtype != object:
        return v
    return np.array([b.decode("utf-8") for b in v.ravel()], dtype=str).reshape(v.shape)


np.savez(sys.argv[2], **{k: readable(v) for k, v in out.items()})
print("ok", len(out))
'''


def _fresh_env():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the repository is not importable
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return env


GENERATE = {"greedy": {"max_new_tokens": 15, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 1},
            "top_p": {"max_new_tokens": 10, "temperature": 0.9, "top_k": 50, "top_p": 0.8, "seed": 11, "num_beams": 1}}
DECODE_IDS = np.random.default_rng(3).integers(0, 400, size=(3, 6)).T.tolist()  # 6 steps of 3 sequences


@pytest.fixture(scope="module")
def fresh_process(exported, tokenizer, tmp_path_factory):
    work = tmp_path_factory.mktemp("fresh")
    python_ids = tokenizer.encode_batch([_text(t) for t in TEXTS.values()])
    extended_ids = exported["extended"][0].tokenizer.encode_batch(EXTENDED_TEXTS)
    plan = {
        "subword": {"path": exported["subword"][1], "texts": [_bytes(t).hex() for t in TEXTS.values()],
                    "ids": pad(python_ids, 0, np.int32).tolist(), "lengths": [len(i) for i in python_ids],
                    "prefixes": PREFIXES, "k": K, "decode_ids": DECODE_IDS,
                    "prompt": tokenizer.encode(PROMPT, add_eos=False), "max_length": STREAM_LENGTH,
                    "never": [0, 1, tokenizer.unk_id], "generate": GENERATE},
        "extended": {"path": exported["extended"][1], "texts": [_bytes(t).hex() for t in EXTENDED_TEXTS],
                     "ids": pad(extended_ids, 0, np.int32).tolist(), "lengths": [len(i) for i in extended_ids],
                     "prefixes": ["kubectl get", "the cat"], "k": [5, 5]},
        "short": {"path": exported["short"][1],
                  "texts": [_bytes(t).hex() for t in list(cut_lines(tokenizer).values()) + list(TEXTS.values())],
                  "generate": {"greedy": {**GENERATE["greedy"], "max_new_tokens": 5}}},
    }
    (work / "plan.json").write_text(json.dumps(plan))
    (work / "fresh.py").write_text(FRESH_PROCESS)
    proc = subprocess.run([sys.executable, "fresh.py", "plan.json", "out.npz"], cwd=work, env=_fresh_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(work / "out.npz"))


def _served(fresh_process, name, signature):
    prefix = f"{name}/{signature}/"
    return {key[len(prefix):]: value for key, value in fresh_process.items() if key.startswith(prefix)}


@pytest.mark.ci
def test_fresh_process_imports_only_tensorflow_and_tensorflow_text(fresh_process):
    assert list(fresh_process["project_modules"]) == []


def assert_word_scores(served, rows, what):
    lengths = np.array([len(r) for r in rows], np.int32)
    np.testing.assert_array_equal(served["lengths"], lengths, err_msg=what)
    assert served["token_log_probs"].shape == (len(rows), max(lengths)), what
    # to 1e-5, and a relative 1e-6 for a long word's sum of many pieces (float32 at -400 is 3e-5 apart)
    np.testing.assert_allclose(served["token_log_probs"], pad(rows, 0.0, np.float32), rtol=1e-6, atol=1e-5,
                               err_msg=what)
    total = np.array([np.sum(r, dtype=np.float64) for r in rows])
    np.testing.assert_allclose(served["log_prob"], total, rtol=1e-6, atol=1e-5, err_msg=what)
    # per word, saturating at float32's largest value instead of overflowing to infinity
    perplexity = np.minimum(np.exp(-total / np.maximum(lengths, 1)), np.finfo(np.float32).max)
    np.testing.assert_allclose(served["perplexity"], perplexity, rtol=1e-5, err_msg=what)
    for value in served.values():
        assert np.all(np.isfinite(value)), what


@pytest.mark.ci
def test_serving_default_scores_words_as_score_does(exported, tokenizer, fresh_process):
    model, _, max_tokens = exported["subword"]
    served = _served(fresh_process, "subword", "serving_default")
    rows = [expected_scores(model, text, max_tokens) for text in TEXTS.values()]
    assert_word_scores(served, rows, "serving_default")
    # one score per whitespace-separated word of the normalised text, and </s>
    for (name, text), length in zip(TEXTS.items(), served["lengths"].tolist()):
        words = len(tokenizer.normalize(text).split())
        assert length == (0 if name == "over-long word" else words + 1), name
    assert dict(zip(TEXTS, served["lengths"].tolist()))["whitespace only"] == 1
    # words of several pieces were summed: more pieces than words
    pieces = sum(len(ids) - 1 for ids in tokenizer.encode_batch([_text(t) for t in TEXTS.values()]))
    assert pieces > 2 * int(np.sum(served["lengths"]))


@pytest.mark.ci
def test_in_graph_ids_are_the_python_ids(exported, tokenizer, fresh_process):
    """score_ids on the Python ids gives per-piece scores whose sum is serving_default's total for
    every line that is not cut: the graph scored the same pieces."""
    model, _, max_tokens = exported["subword"]
    python_ids = tokenizer.encode_batch([_text(t) for t in TEXTS.values()])
    by_ids = _served(fresh_process, "subword", "score_ids")
    served = _served(fresh_process, "subword", "serving_default")
    np.testing.assert_array_equal(by_ids["lengths"], [len(ids) - 1 for ids in python_ids])
    for i, (name, ids) in enumerate(zip(TEXTS, python_ids)):
        want = model.score([ids])[0]
        np.testing.assert_allclose(by_ids["token_log_probs"][i, : len(want)], want, atol=1e-5, err_msg=name)
        if len(ids) - 2 <= max_tokens:
            np.testing.assert_allclose(served["log_prob"][i], np.sum(want, dtype=np.float64), rtol=1e-6,
                                       atol=1e-4, err_msg=name)
    # and the pieces' log-probabilities are spread (not near-uniform), so that another
    # tokenisation would change a sum by far more than the tolerance
    assert np.std(model.log_probs([[1]])[0, -1]) > 0.5


@pytest.mark.ci
def test_an_extended_tokenizer_runs_in_the_export(exported, tokenizer, fresh_process):
    """A model whose tokenizer was extended (zoo.models.extend) serves its new ids: the graph
    splits text as Python does, new pieces included, and scores it as the model does."""
    model, _, max_tokens = exported["extended"]
    assert 0 < model.tokenizer.added_pieces <= 12 and len(model.tokenizer) == len(tokenizer) + model.tokenizer.added_pieces
    python_ids = model.tokenizer.encode_batch(EXTENDED_TEXTS)
    assert max(max(ids) for ids in python_ids) >= len(tokenizer)  # new ids are used
    by_ids = _served(fresh_process, "extended", "score_ids")
    served = _served(fresh_process, "extended", "serving_default")
    for i, ids in enumerate(python_ids):
        want = model.score([ids])[0]
        np.testing.assert_allclose(by_ids["token_log_probs"][i, : len(want)], want, atol=1e-5)
        np.testing.assert_allclose(served["log_prob"][i], np.sum(want, dtype=np.float64), rtol=1e-6, atol=1e-4)
    assert_word_scores(served, [expected_scores(model, text, max_tokens) for text in EXTENDED_TEXTS],
                       "extended serving_default")
    served = _served(fresh_process, "extended", "next_token")
    for row, prefix in enumerate(["kubectl get", "the cat"]):
        log_probs = model.log_probs([model.tokenizer.encode(prefix, add_eos=False)])[0, -1].astype("float64")
        log_probs[[0, 1, model.tokenizer.unk_id]] = -np.inf
        order = [int(i) for i in np.argsort(-log_probs, kind="stable")[:5]]
        assert served["ids"][row].tolist() == order, prefix
        assert served["words"][row].tolist() == model.tokenizer.token_texts(order), prefix


@pytest.mark.ci
def test_an_over_long_line_is_cut_at_a_word_boundary(exported, tokenizer, fresh_process):
    model, _, max_tokens = exported["short"]
    cases = cut_lines(tokenizer)
    texts = list(cases.values()) + list(TEXTS.values())
    served = _served(fresh_process, "short", "serving_default")
    rows = [expected_scores(model, text, max_tokens) for text in texts]
    assert_word_scores(served, rows, "short serving_default")
    lengths = dict(zip(cases, served["lengths"].tolist()))
    words = {case: len(tokenizer.normalize(line).split()) for case, line in cases.items()}
    assert lengths["exactly max_tokens"] == words["exactly max_tokens"] + 1  # not cut: </s> scored
    assert lengths["first word too long"] == 0
    line = cases["cut inside a word"]
    ids = tokenizer.encode(line)
    index = tokenizer.word_index(ids)[1:-1]
    # the word the cut falls in is dropped: only the words before it are scored
    assert lengths["cut inside a word"] == index[SHORT] < words["cut inside a word"]
    np.testing.assert_allclose(served["token_log_probs"][1, : index[SHORT]], model.score([line])[0][: index[SHORT]],
                               atol=1e-5)
    assert lengths["cut before a word"] == tokenizer.word_index(tokenizer.encode(cases["cut before a word"]))[1 + SHORT]
    assert served["log_prob"][3] == 0 and served["perplexity"][3] == 1  # nothing scored


@pytest.mark.ci
def test_next_token_gives_readable_pieces_and_the_top_k(exported, tokenizer, fresh_process):
    model, _, max_tokens = exported["subword"]
    served = _served(fresh_process, "subword", "next_token")
    top = max(K)
    assert served["ids"].shape == served["words"].shape == served["log_probs"].shape == (len(PREFIXES), top)
    for row, (prefix, k) in enumerate(zip(PREFIXES, K)):
        ids = tokenizer.encode(prefix, add_eos=False)
        ids = ids[:1] + ids[1:][-max_tokens:]
        log_probs = model.log_probs([ids])[0, -1].astype("float64")
        log_probs[[0, 1, tokenizer.unk_id]] = -np.inf
        order = [int(i) for i in np.argsort(-log_probs, kind="stable")[:k]]
        assert served["ids"][row].tolist() == order + [-1] * (top - k), prefix
        np.testing.assert_allclose(served["log_probs"][row, :k], log_probs[order], atol=1e-5)
        words = served["words"][row].tolist()
        assert words == tokenizer.token_texts(order) + [""] * (top - k), prefix
    words = [w for row in served["words"].tolist() for w in row if w]
    assert not any("\u2581" in w for w in words)
    assert any(w.startswith(" ") and len(w) > 1 for w in words)  # a word-initial piece: " the"


@pytest.mark.ci
def test_decode_step_streamed_equals_in_process(exported, tokenizer, fresh_process):
    model, _, _ = exported["subword"]
    state, steps = None, []
    for ids in DECODE_IDS:
        log_probs, state = model.decode_step(ids, state)
        steps.append(np.asarray(log_probs))
    np.testing.assert_allclose(fresh_process["subword/decode_step/log_probs"], np.stack(steps, axis=1), atol=1e-5)
    prompt = tokenizer.encode(PROMPT, add_eos=False)
    generated = model.generate(prompt, max_new_tokens=STREAM_LENGTH, temperature=0)[len(prompt):]
    assert len(generated) == STREAM_LENGTH
    assert fresh_process["subword/stream"].tolist() == generated


@pytest.mark.ci
def test_generate_signature_detokenises_what_lm_generate_writes(exported, tokenizer, fresh_process):
    model, _, _ = exported["subword"]
    texts = [_text(t) for t in TEXTS.values()]
    prompts = [tokenizer.encode(t, add_eos=False) for t in texts]
    prompts = [p[:1] + p[1:][-export.DEFAULT_MAX_TOKENS:] for p in prompts]  # the export's cut
    for tag, settings in GENERATE.items():
        served = _served(fresh_process, "subword", f"generate_{tag}")
        kw = {"max_new_tokens": settings["max_new_tokens"], "seed": settings["seed"], "jit_compile": False}
        kw.update({"temperature": 0} if tag == "greedy" else
                  {"temperature": settings["temperature"], "top_k": settings["top_k"], "top_p": settings["top_p"]})
        rows = model.generate(prompts, **kw)
        new = [row[len(p):] for row, p in zip(rows, prompts)]
        assert served["lengths"].tolist() == [len(n) for n in new], tag
        assert served["ids"].tolist() == pad(new, 0, np.int32).tolist(), tag
        assert served["text"].tolist() == [tokenizer.decode(r, whole_characters=True) for r in rows], tag
        assert served["completion"].tolist() == [tokenizer.decode(n, whole_characters=True) for n in new], tag
    # the text of a string prompt, as lm.generate gives it
    assert served["text"][0] == model.generate(texts[0], **kw)


def served_prompt(tokenizer, text, max_tokens):
    """The prompt `generate` reads: `<s>` and the last `max_tokens` pieces of a longer prompt,
    from the first of them that starts a word (all of them where none does)."""
    ids = tokenizer.encode(text, add_eos=False)
    if len(ids) - 1 <= max_tokens:
        return ids
    index = tokenizer.word_index(ids)  # a piece starts a word where its word's index changes
    start = len(ids) - max_tokens
    first = next((i for i in range(start, len(ids)) if index[i] != index[i - 1]), start)
    return ids[:1] + ids[first:]


@pytest.mark.ci
def test_generate_cuts_a_long_prompt_at_a_word_boundary(exported, tokenizer, fresh_process):
    """Before, `generate` kept the last max_tokens pieces of a long prompt, so its `text` could
    start inside a word ("ing the cat …") where serving_default cuts between words."""
    model, _, max_tokens = exported["short"]
    texts = [_text(t) for t in list(cut_lines(tokenizer).values()) + list(TEXTS.values())]
    served = _served(fresh_process, "short", "generate_greedy")
    prompts = [served_prompt(tokenizer, t, max_tokens) for t in texts]
    rows = model.generate(prompts, max_new_tokens=5, temperature=0, jit_compile=False)
    # `text` shows the cut (the prompt it starts with); the tiny model sees 3 tokens back, so its
    # new ids would be the same from either cut
    assert served["text"].tolist() == [tokenizer.decode(r) for r in rows]
    assert served["ids"].tolist() == pad([r[len(p):] for r, p in zip(rows, prompts)], 0, np.int32).tolist()
    cut = [t for t, p in zip(texts, prompts) if len(p) < len(tokenizer.encode(t, add_eos=False))]
    assert len(cut) >= 4
    # some window of the last max_tokens pieces began inside a word, and that word was dropped
    naive = [tokenizer.encode(t, add_eos=False) for t in cut]
    naive = [ids[:1] + ids[1:][-max_tokens:] for ids in naive]
    inside = [t for t, n in zip(cut, naive) if served_prompt(tokenizer, t, max_tokens) != n]
    assert inside
    for line in inside:
        kept = tokenizer.decode(served_prompt(tokenizer, line, max_tokens))
        assert tokenizer.normalize(line).endswith(" " + kept), line  # whole words only


@pytest.mark.ci
def test_every_signature_answers_an_empty_batch(exported):
    import tensorflow as tf

    sigs = tf.saved_model.load(exported["subword"][1]).signatures
    empty = tf.constant([], tf.string)
    outs = [sigs["serving_default"](text=empty), sigs["next_token"](text=empty, k=tf.constant(2)),
            sigs["generate"](text=empty, **{k: tf.constant(v) for k, v in GENERATE["top_p"].items()})]
    for out in outs:
        assert all(v.shape[0] == 0 for v in out.values()), {k: v.shape for k, v in out.items()}
    assert sigs["serving_default"](text=tf.constant(["the cat"]))["lengths"].numpy().tolist() == [3]


def test_metadata_records_the_tokenizer(exported):
    path = exported["subword"][1]
    metadata = json.load(open(os.path.join(path, "assets.extra", "zoo_export.json")))
    assert metadata["tokenizer"] == "subword" and metadata["normalization"] == NORMALIZATION
    assert metadata["vocabulary_size"] == 400 and metadata["max_tokens"] == export.DEFAULT_MAX_TOKENS
    assert metadata["special_ids"]["</s>"] == 2
    assert not os.path.exists(os.path.join(path, "assets", "vocabulary.txt"))  # the model is in the graph


@pytest.mark.ci
def test_without_tensorflow_text_the_export_does_not_load(exported, tmp_path):
    script = "import sys, tensorflow as tf\ntf.saved_model.load(sys.argv[1])\n"
    proc = subprocess.run([sys.executable, "-c", script, exported["subword"][1]], cwd=tmp_path, env=_fresh_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert re.search(r"Op type not registered '(Sentencepiece\w*|NormalizeUTF8)'", proc.stderr), proc.stderr[-2000:]


# ---- docs/serving.md's check of a SavedModel's ops -----------------------------------------------
def readme_ops_command():
    text = open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8").read()
    block = re.search(r"<!-- graph ops -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "docs/serving.md: the <!-- graph ops --> block is missing"
    command = block.group(1).strip()
    assert "exports/gcnn-ptb/1" in command
    return command


def _ops(command, path, tmp_path):
    env = {**_fresh_env(), "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(["bash", "-c", command.replace("exports/gcnn-ptb/1", path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(proc.stdout.split())


@pytest.mark.ci
def test_readme_one_liner_lists_the_tensorflow_text_ops(exported, tiny_model, tmp_path):
    command = readme_ops_command()
    ops = _ops(command, exported["subword"][1], tmp_path)
    assert {"SentencepieceOp", "SentencepieceTokenizeOp", "NormalizeUTF8", "UnsortedSegmentSum"} <= ops
    # a word model's graph has none of them
    words = tiny_model("gcnn", tokenizer=WordTokenizer(list(SPECIALS) + ["the", "cat", "sat", "mat"]))
    path = export.export_saved_model(words, str(tmp_path / "exports"), "words")
    ops = _ops(command, path, tmp_path)
    assert "StringSplitV2" in ops and not {o for o in ops if o.startswith("Sentencepiece") or o == "NormalizeUTF8"}


@pytest.mark.ci
def test_saved_model_cli_lists_the_signatures_and_the_ops(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    proc = subprocess.run([cli, "show", "--dir", exported["subword"][1], "--all"], capture_output=True, text=True,
                          timeout=300, env=_fresh_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = set(re.findall(r"^signature_def\['([^']+)'\]:", proc.stdout, re.M))
    assert shown - {"__saved_model_init_op"} == set(SIGNATURES)
    ops = re.search(r"contains the following ops: \{([^}]*)\}", proc.stdout).group(1)
    assert "'SentencepieceOp'" in ops and "'NormalizeUTF8'" in ops
