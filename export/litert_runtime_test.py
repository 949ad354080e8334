"""zoo_litert (runtime/), the LiteRT runtime without TensorFlow, against the library it stands in
for: its tokenizers give the zoo's ids (odd Unicode included), `score` gives `lm.score`'s values to
1e-4, greedy `generate` writes `lm.generate`'s text and ids (tiny models of each family here, the
trained presets for 100 new tokens), sampling draws through the export's `sample` signature with
the same tokens for the same seed, bad input is refused in one sentence, concurrent calls from a
thread pool equal sequential ones, `import zoo_litert` imports neither TensorFlow nor the zoo, and
(ci) it installs and runs in a fresh venv holding only ai-edge-litert, numpy and sentencepiece."""

import json
import os
import runpy
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import zoo_litert
from tests.export_checks import discourage_end_of_sentence, tiny_gcnn, tiny_lstm, tiny_moe, vocabulary
from zoo.data import CharTokenizer, SubwordTokenizer, WordTokenizer
from zoo.export import export_litert, litert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = 1e-4  # float32, absolute, on log-probabilities (issue 54, item 3)
# odd Unicode: combining accents (NFC), CJK, emoji, Python-only whitespace (U+3000, U+00A0, \x1c,
# U+2028), SentencePiece's boundary mark, a zero-width space (not whitespace), a lone surrogate
ODD = ["naïve café 中文 end.", "Cafe\u0301\u2581au\u3000lait ", "  tabs\tand\nnew\u00a0lines\x1c\u2028x  ",
       "emoji 🙂 and ‮rtl‬ text", "zero\u200bwidth", "a lone \ud800 surrogate", "", "   ", "ǅ Ⅻ ﬁ ①"]
TEXTS = ["the cat sat on the mat", "a big dog", "the zebra ate   fish\tat home", "the"] + ODD
LINES = [f"the cat {i} sat on the mat with a dog" for i in range(60)] + ["naïve café 中文 end.", "Café ﬁ 🙂"] * 5


def _one_sentence(message):
    assert "\n" not in message and message.endswith(".") and message.count(". ") == 0, message
    return message


@pytest.fixture(scope="module")
def subword():
    return SubwordTokenizer.train(LINES, 296)


@pytest.fixture(scope="module")
def exported(tiny_model, tmp_path_factory, subword):
    """{name: (Keras model, zoo_litert model)}: tiny models of each family exported in float32,
    `</s>` discouraged (greedy runs its whole length) but for the LSTM's (some greedy rows end
    there)."""
    base = tmp_path_factory.mktemp("runtime")
    models = {"gcnn": tiny_gcnn(tiny_model), "lstm": tiny_lstm(tiny_model), "moe": tiny_moe(tiny_model),
              "subword": tiny_model("gcnn", blocks=[[[3, 16]]], cutoffs=[100], tokenizer=subword)}
    out = {}
    for name, model in models.items():
        if name != "subword":
            model.tokenizer = vocabulary()
        if name != "lstm":
            discourage_end_of_sentence(model)
        out[name] = (model, zoo_litert.load(export_litert(model, base / name)))
    return out


# ---- tokenizing without TensorFlow -----------------------------------------------------------
def _same_tokenizer(ours, theirs, texts):
    assert len(ours) == len(theirs) and (ours.bos_id, ours.eos_id, ours.unk_id) == \
        (theirs.bos_id, theirs.eos_id, theirs.unk_id)
    for text in texts + [t.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode() for t in texts]:
        ids = theirs.encode(text)
        assert ours.encode(text) == ids, text
        assert ours.encode(text, add_bos=False, add_eos=False) == theirs.encode(text, add_bos=False, add_eos=False)
        assert ours.decode(ids) == theirs.decode(ids), text
        for cut in range(len(ids)):  # a character cut by the end (a subword model's byte pieces)
            assert ours.decode(ids[:cut], whole_characters=True) == theirs.decode(ids[:cut], whole_characters=True)
        if theirs.scores_per_word:
            assert ours.word_index(ids) == theirs.word_index(ids), text


@pytest.mark.parametrize("kind", ["word", "char", "fairseq-word", "subword"])
def test_its_tokenizers_give_the_librarys_ids_and_text(kind, subword, tmp_path):
    built_from = [t for t in TEXTS + LINES if "\ud800" not in t]  # a vocabulary file holds no lone surrogate
    words = WordTokenizer.build(built_from)
    theirs = {"word": words, "char": CharTokenizer.build(built_from),
              "fairseq-word": WordTokenizer(words.tokens, line_start="</s>"), "subword": subword}[kind]
    theirs.save(tmp_path)
    ours = zoo_litert.load_tokenizer(tmp_path, theirs.kind)
    assert type(ours).__name__ == type(theirs).__name__
    _same_tokenizer(ours, theirs, TEXTS + LINES[:3])
    # a word the vocabulary lacks, and a character it lacks, are <unk>; the subword's byte pieces spell them
    _same_tokenizer(ours, theirs, ["the quokka ate ☃", "ünïcödé ☃☃"])


# ---- exact values ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gcnn", "lstm", "moe", "subword"])
def test_score_gives_lm_scores_values_for_texts_and_ids(exported, name):
    model, runtime = exported[name]
    texts = [t for t in TEXTS if t.strip()] + ["", "a"]
    for ours, theirs in zip(runtime.score(texts), model.score(texts)):
        assert ours.dtype == np.float32 and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
    rows = [model.tokenizer.encode(t) for t in texts[:3]] + [[1, 5]]
    for ours, theirs in zip(runtime.score(rows), model.score(rows)):
        np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(runtime.score(rows[0])[0], model.score(rows[0])[0], atol=TOLERANCE, rtol=0)
    token_log_probs, log_probs, state = runtime.prefill(rows[0])
    full = model.log_probs([rows[0]])[0]
    np.testing.assert_allclose(log_probs, full[-1], atol=TOLERANCE, rtol=0)
    step, _ = runtime.decode(rows[0][0], np.zeros([1, runtime.state_size], np.float32))
    np.testing.assert_allclose(step, full[0], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("name", ["gcnn", "lstm", "moe", "subword"])
def test_greedy_generate_writes_lm_generates_text_and_ids(exported, name):
    model, runtime = exported[name]
    prompts = ["the cat", "a dog sat on", "naïve café"]
    assert runtime.generate(prompts, 30, sampler="greedy") == model.generate(prompts, 30, sampler="greedy")
    rows = [model.tokenizer.encode(p, add_eos=False) for p in prompts]
    ours = runtime.generate(rows, 30, sampler="greedy", stop=None)
    assert ours == model.generate(rows, 30, sampler="greedy", stop=None)
    assert [len(r) for r in ours] == [len(r) + 30 for r in rows]
    # a prompt longer than a greedy call feeds (prefill for all but its last id) and more new
    # tokens than a call writes
    long = [1] + [4, 5, 6, 7, 8] * 14
    assert len(long) > runtime.greedy_steps > 0
    assert runtime.generate(long, 70, sampler="greedy", stop=None) == model.generate(long, 70, sampler="greedy",
                                                                                     stop=None)


def test_greedy_stops_at_end_of_sentence_and_at_stop_texts_and_ids_as_lm_generate(exported):
    model, runtime = exported["lstm"]
    prompts = ["the cat", "a dog sat", "the", "he saw"]
    texts = {stop: runtime.generate(prompts, 25, sampler="greedy", stop=stop)
             for stop in (None, "auto", ("blue park", "fast she"))}
    for stop, ours in texts.items():
        assert ours == model.generate(prompts, 25, sampler="greedy", stop=stop), stop
    assert len(set(map(tuple, texts.values()))) == 3  # </s> and the stop texts each end some row
    rows = [model.tokenizer.encode(p, add_eos=False) for p in prompts]
    stop_ids = [model.tokenizer.encode("park the", add_bos=False, add_eos=False), model.tokenizer.encode("she")[1]]
    ours = runtime.generate(rows, 25, sampler="greedy", stop=stop_ids)
    assert ours == model.generate(rows, 25, sampler="greedy", stop=stop_ids)
    assert ours != runtime.generate(rows, 25, sampler="greedy")


# ---- sampling -------------------------------------------------------------------------------
def test_sampling_draws_the_same_tokens_for_the_same_seed_on_every_call(exported):
    import zoo

    _, runtime = exported["gcnn"]
    for kwargs in (dict(), dict(temperature=0.7), dict(sampler="top_k", top_k=5), dict(top_p=0.8, top_k=20),
                   dict(sampler="top_p", top_p=0.9, temperature=1.3)):
        first = runtime.generate(["the cat", "a dog"], 15, seed=11, **kwargs)
        assert runtime.generate(["the cat", "a dog"], 15, seed=11, **kwargs) == first
        assert len(set(runtime.generate(["the cat"] * 4, 15, seed=11, **kwargs))) > 1  # each row its own draws
        assert len({tuple(runtime.generate("the cat", 15, seed=s, **kwargs).split()) for s in range(5)}) > 1
    # zoo.samplers objects the file carries are read by their fields
    assert runtime.generate("the", 10, sampler=zoo.samplers.TopK(k=3, temperature=0.7), seed=2) == \
        runtime.generate("the", 10, sampler="top_k", top_k=3, temperature=0.7, seed=2)
    assert runtime.generate("the", 10, sampler=zoo.samplers.Greedy()) == runtime.generate("the", 10, temperature=0)


def test_draws_follow_the_candidates_distribution(exported):
    """Through the `sample` signature, top-k 3 at temperature 0.5: each id's share of 3,000 draws
    is its probability after the rule (softmax of the top 3 log-probabilities / 0.5), within 0.03."""
    from zoo_litert import sampling

    _, runtime = exported["gcnn"]
    _, log_probs, _ = runtime.prefill([1, 4, 6])
    top = np.argsort(-log_probs, kind="stable")[:3]
    expected = np.exp(log_probs[top] / 0.5) / np.exp(log_probs[top] / 0.5).sum()
    rng, settings = sampling.noise_generator(3, 0), sampling.Sampling("top_k", top_k=3, temperature=0.5)
    drawn = [runtime.draw(log_probs, sampling.uniform_noise(rng, runtime.vocabulary_size), settings)
             for _ in range(3000)]
    assert set(drawn) <= set(top.tolist())
    np.testing.assert_allclose([drawn.count(int(i)) / 3000 for i in top], expected, atol=0.03)


# ---- bad input ------------------------------------------------------------------------------
def test_bad_input_is_refused_in_one_sentence_naming_it(exported):
    import zoo

    _, runtime = exported["gcnn"]
    v, size = runtime.vocabulary_size, runtime.state_size
    cases = [
        (lambda: runtime.decode(4, np.zeros([1, size + 1], np.float32)), rf"shape \(1, {size + 1}\).*shape \(1, {size}\)"),
        (lambda: runtime.decode(4, np.zeros([2, size], np.float32)), r"shape \(2, "),
        (lambda: runtime.decode(4, np.zeros([1, size], np.int32)), "dtype int32"),
        (lambda: runtime.decode(v, np.zeros([1, size], np.float32)), rf"Token id {v} is outside .* \[0, {v - 1}\]"),
        (lambda: runtime.prefill([1, 4, -1]), r"Token id -1 is outside the vocabulary"),
        (lambda: runtime.prefill([]), "no id"),
        (lambda: runtime.score([[1, v + 5]]), rf"Token id {v + 5} is outside"),
        (lambda: runtime.generate([[1, 4], [1, v]], 3), rf"Token id {v} is outside"),
        (lambda: runtime.detokenize([4, 999]), "Token id 999 is outside"),
        (lambda: runtime.generate("", 3), r"Prompt 0 \(''\) is empty"),
        (lambda: runtime.generate(["the cat", "   "], 3), r"Prompt 1 \('   '\) is empty"),
        (lambda: runtime.generate([[1, 4], []], 3), r"Prompt 1 \(\[\]\) is empty"),
        (lambda: runtime.generate([], 3), r"prompts must be .*got \[\]"),
        (lambda: runtime.generate("the", 3, sampler="beam"), "Beam search .* cannot run from a LiteRT export"),
        (lambda: runtime.generate("the", 3, num_beams=4), r"Beam search \(num_beams=4\) cannot run"),
        (lambda: runtime.generate("the", 3, sampler=zoo.samplers.Beam(2)), r"The sampler Beam\(num_beams=2"),
        (lambda: runtime.generate("the", 3, sampler=object()), "The sampler <object object"),
        (lambda: runtime.generate("the", 3, sampler="nucleus"), "Unknown sampler 'nucleus'"),
        (lambda: runtime.generate("the", 3, sampler="greedy", top_k=3), "greedy sampler does not take top_k"),
        (lambda: runtime.generate("the", 3, top_k=v + 1), rf"top_k must be in \[1, {v}\]"),
        (lambda: runtime.generate("the", 3, top_p=1.5), r"top_p must be a number in \(0, 1\]"),
        (lambda: runtime.generate("the", 3, sampler="random", temperature=0), "temperature=0 is greedy"),
        (lambda: runtime.generate("the", 0), r"max_new_tokens must be an integer in \[1, "),
        (lambda: runtime.generate([[1, 4]], 3, stop="cat"), "needs text prompts"),
        (lambda: runtime.score(["the", [1, 4]]), "mixed with ids"),
        (lambda: runtime.score([[1]]), "Row 0 has 1 token"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as e:
            call()
        _one_sentence(str(e.value).replace("zoo.samplers.", "zoo_samplers_").replace("object object at", "object at"))


def test_a_directory_that_is_not_a_current_export_is_refused(exported, tmp_path):
    _, runtime = exported["gcnn"]
    with pytest.raises(ValueError, match="is not a LiteRT export of the zoo: its zoo_litert.json is missing"):
        zoo_litert.load(tmp_path)
    old = tmp_path / "old"
    shutil.copytree(runtime.path, old)
    about = json.loads((old / litert.METADATA_FILE).read_text())
    del about["signatures"]["sample"]
    (old / litert.METADATA_FILE).write_text(json.dumps(about))
    with pytest.raises(ValueError, match="without the signature sample .* export the model again") as e:
        zoo_litert.load(old)
    _one_sentence(str(e.value))


# ---- several requests at once ----------------------------------------------------------------
def test_concurrent_calls_from_threads_equal_sequential_calls(exported):
    """One interpreter per thread: 4 threads × 24 requests give what the requests give one by one."""
    _, runtime = exported["lstm"]
    requests = [("generate", (p, 12), dict(seed=s, top_k=10)) for s, p in enumerate(["the cat", "a dog"] * 6)] + \
               [("generate", (p, 12), dict(sampler="greedy")) for p in ["the", "he saw the"] * 3] + \
               [("score", (t,), {}) for t in [TEXTS[:3], TEXTS[3:5], ["the cat sat"]] * 2]

    def run(request):
        name, args, kwargs = request
        out = getattr(runtime, name)(*args, **kwargs)
        return out, threading.get_ident(), id(runtime._runners())

    sequential = [run(r)[0] for r in requests]
    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(run, requests))
    for (out, _, _), expected in zip(concurrent, sequential):
        if isinstance(expected, list) and expected and isinstance(expected[0], np.ndarray):
            assert all(np.array_equal(a, b) for a, b in zip(out, expected))
        else:
            assert out == expected
    threads = {thread: interpreter for _, thread, interpreter in concurrent}
    assert len(threads) > 1 and len(set(threads.values())) == len(threads)  # one interpreter per thread


# ---- without TensorFlow ----------------------------------------------------------------------
def test_import_zoo_litert_leaves_tensorflow_and_the_zoo_out(exported, tmp_path):
    """In a fresh interpreter: import it, load a word and a subword export, score and generate."""
    paths = [exported["gcnn"][1].path, exported["subword"][1].path]
    code = f"""
import sys, zoo_litert
for path in {paths!r}:
    model = zoo_litert.load(path)
    model.score(["the cat sat"]); model.generate("the cat", 5, top_p=0.9, seed=0)
print(sorted(name for name in sys.modules if name.split(".")[0] in ("tensorflow", "zoo", "keras", "tensorflow_text")))
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---- the example export shipped with the package ---------------------------------------------
def _make_example():
    return runpy.run_path(os.path.join(ROOT, "runtime", "make_example.py"))


def test_the_packaged_example_is_an_export_of_this_zoo(tmp_path):
    """Its zoo_litert.json says what an export of the same (untrained) architecture says today."""
    made = _make_example()
    tokenizer = WordTokenizer.build(made["SENTENCES"])
    lm = made["untrained_model"]()
    fresh = json.loads(open(os.path.join(export_litert(lm, tmp_path / "fresh"), litert.METADATA_FILE)).read())
    shipped = json.loads(open(os.path.join(zoo_litert.EXAMPLE, litert.METADATA_FILE)).read())
    for key in ("signatures", "state", "never_emitted", "sampling", "special_ids", "tokenizer", "ops"):
        assert shipped[key] == fresh[key], key
    assert {**shipped["config"], "name": None} == {**fresh["config"], "name": None}  # Keras numbers its names
    assert zoo_litert.load_tokenizer(zoo_litert.EXAMPLE).tokens == tokenizer.tokens


def test_the_packaged_example_answers_as_its_model():
    """The shipped export answers as the weights make_example.py kept beside it (training again
    on another CPU gives other weights, so the check does not train)."""
    lm = _make_example()["saved_model"]()
    example = zoo_litert.load(zoo_litert.EXAMPLE)
    texts = ["the cat sat on the mat", "a dog ran to the park", "the man"]
    for ours, theirs in zip(example.score(texts), lm.score(texts)):
        np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
    assert example.generate(texts, 8, sampler="greedy") == lm.generate(texts, 8, sampler="greedy")


# ---- the trained presets ---------------------------------------------------------------------
PRESET_PROMPTS = {"ptb": ["the company said", "in new york stock exchange composite trading yesterday",
                          "mr. <unk> said the"],
                  "en": ["The city council voted", "In 1995, the band released", "Scientists have found that"]}


@pytest.mark.ci  # three trained presets exported and 100 tokens generated each way (about a minute)
@pytest.mark.parametrize("name", ["gcnn-ptb", "lstmp-ptb", "gcnn-en"])
def test_greedy_text_of_the_trained_presets_equals_lm_generate_for_100_new_tokens(name, tmp_path):
    import zoo

    lm = zoo.load(name, weights="trained")
    runtime = zoo_litert.load(export_litert(lm, tmp_path / name))
    prompts = PRESET_PROMPTS["en" if name.endswith("-en") else "ptb"]
    assert runtime.generate(prompts, 100, sampler="greedy") == lm.generate(prompts, 100, sampler="greedy")
    rows = [lm.tokenizer.encode(p, add_eos=False) for p in prompts]
    ours = runtime.generate(rows, 100, sampler="greedy", stop=None)
    assert ours == lm.generate(rows, 100, sampler="greedy", stop=None)
    assert all(len(o) == len(r) + 100 for o, r in zip(ours, rows))
    for a, b in zip(runtime.score(prompts), lm.score(prompts)):
        np.testing.assert_allclose(a, b, atol=TOLERANCE, rtol=0)


# ---- a fresh venv without TensorFlow ---------------------------------------------------------
def test_its_distribution_requires_litert_numpy_and_sentencepiece_only():
    from tests.packaging_test import read_setup

    runtime = read_setup(os.path.join(ROOT, "runtime"))
    library = read_setup(ROOT)
    assert runtime.name == "gcnn-moe-zoo-litert" and runtime.packages == ["zoo_litert"]
    assert sorted(r.split(">")[0].split("<")[0] for r in runtime.install_requires) == \
        ["ai-edge-litert", "numpy", "sentencepiece"]
    assert set(runtime.install_requires) - {"numpy"} <= set(library.install_requires) | set(library.extras_require["litert"])
    assert "zoo_litert" in library.packages and library.package_dir["zoo_litert"] == "runtime/zoo_litert"



VENV_SCRIPT = """
import json, sys, zoo_litert
model = zoo_litert.load(sys.argv[1])
texts = json.loads(sys.argv[2])
out = {"score": [s.tolist() for s in model.score(texts)], "greedy": model.generate(texts, 20, sampler="greedy"),
       "sampled": [model.generate(texts[0], 10, top_k=5, seed=s) for s in (0, 0, 1)]}
try:
    import tensorflow
    out["tensorflow"] = True
except ImportError:
    out["tensorflow"] = False
print(json.dumps(out))
"""


@pytest.mark.ci  # makes a venv and installs ai-edge-litert, numpy and sentencepiece from the package index
def test_it_installs_and_runs_in_a_fresh_venv_with_only_its_three_dependencies(exported, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["ai-edge-litert>=2.0,<3", "numpy", "sentencepiece>=0.1.99,<0.2.2"], check=True)
    build = tmp_path / "build"  # a copy of runtime/ (pip's build would write its egg-info into the checkout)
    shutil.copytree(os.path.join(ROOT, "runtime"), build, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    subprocess.run(pip + ["--no-deps", str(build)], check=True)
    frozen = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    assert "tensorflow" not in frozen.lower() and "gcnn-moe-zoo-litert" in frozen
    for name in ("gcnn", "subword"):
        model, runtime = exported[name]
        texts = ["the cat sat on the mat", "naïve café 中文 end."]
        result = subprocess.run([python, "-c", VENV_SCRIPT, runtime.path, json.dumps(texts)], cwd=str(tmp_path),
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert out["tensorflow"] is False
        for ours, theirs in zip(out["score"], model.score(texts)):
            np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
        assert out["greedy"] == model.generate(texts, 20, sampler="greedy")
        assert out["sampled"][0] == out["sampled"][1] == runtime.generate(texts[0], 10, top_k=5, seed=0)
