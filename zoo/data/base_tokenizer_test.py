"""The one tokenizer interface: every tokenizer's Python API runs its graph's ops (so Python and an
export cannot disagree), a tokenizer defined outside the package saves in a preset directory,
loads with `zoo.load` and runs in an export, and no library module branches on a tokenizer's kind."""

import json
import os
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.data import CharTokenizer, SubwordTokenizer, Tokenizer, WordTokenizer, register_tokenizer
from zoo.data.base_tokenizer import _REGISTRY
from zoo.data.graph_tokenizers import WordGraphTokenizer
from zoo.data.tokenizers_test import corpus

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizers():
    lines = corpus()
    return {"word": WordTokenizer.build(lines), "char": CharTokenizer.build(lines),
            "subword": SubwordTokenizer.train(lines, 400)}


class Recording:
    """A graph that records which of its ops the Python API called, then runs them."""

    def __init__(self, graph):
        self.graph, self.calls = graph, set()

    def __getattr__(self, name):
        member = getattr(self.graph, name)
        if callable(member):
            def recorded(*args, **kwargs):
                self.calls.add(name)
                return member(*args, **kwargs)
            return recorded
        return member


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_the_python_api_runs_the_graph(tokenizers, kind):
    tokenizer = tokenizers[kind]
    recording = Recording(tokenizer.build_graph())
    tokenizer.__dict__.pop("_functions", None)
    tokenizer.__dict__.update(_graph=recording, _graph_pid=os.getpid())
    try:
        ids = tokenizer.encode("the cat  sat")
        text = tokenizer.decode(ids)
        assert tokenizer.normalize("the cat  sat") == text
        tokenizer.token_texts(ids)
        assert recording.calls == {"encode", "decode", "normalize", "token_texts"}
    finally:
        for name in ("_graph", "_graph_pid", "_functions"):
            tokenizer.__dict__.pop(name, None)


def test_many_tokenizers_in_one_process_are_not_reported_as_retracing(tokenizers, tmp_path, caplog):
    """Each tokenizer traces its own functions once; TensorFlow must not count six tokenizers' first
    traces as one function retracing (its warning once each tokenizer's function was a bound method)."""
    tokenizers["word"].save(tmp_path)
    with caplog.at_level("WARNING", logger="tensorflow"):
        for _ in range(6):
            tokenizer = WordTokenizer.load(tmp_path)
            assert tokenizer.normalize("the  cat") == "the cat"
            assert tokenizer.decode(tokenizer.encode("the cat")) == "the cat"
    assert not [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()]


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_a_tokenizer_survives_setting_the_global_seed(tokenizers, kind):
    """Eager TensorFlow drops its cached kernels when the seed is set; a SentencePiece model owned
    by its kernel would go with them."""
    tokenizer = tokenizers[kind]
    before = tokenizer.encode_batch(corpus()[:5])
    keras.utils.set_random_seed(3)
    assert tokenizer.encode_batch(corpus()[:5]) == before
    assert tokenizer.decode(before[0]) == tokenizer.normalize(corpus()[0]) or kind == "word"


class LowercaseTokenizer(Tokenizer):
    """A tokenizer of the kind a user writes: words lowercased, from its own file."""

    kind = "lowercase-words"
    files = ("lowercase_words.json",)
    unit = "words"

    def __init__(self, words):
        self.words = ["<pad>", "<s>", "</s>", "<unk>"] + list(words)

    def __len__(self):
        return len(self.words)

    def build_graph(self):
        graph = WordGraphTokenizer(self.words, self.pad_id, self.bos_id, self.eos_id, self.unk_id)
        split = graph.split
        graph.split = lambda text: split(tf.strings.lower(text, encoding="utf-8"))
        return graph

    def save(self, directory):
        path = os.path.join(directory, self.files[0])
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"words": self.words[4:]}, f)
        return path

    @classmethod
    def load(cls, directory):
        with open(os.path.join(directory, cls.files[0]), encoding="utf-8") as f:
            return cls(json.load(f)["words"])


@pytest.fixture
def registered():
    """`LowercaseTokenizer`, registered for one test (the registry is the process's)."""
    register_tokenizer(LowercaseTokenizer)
    yield LowercaseTokenizer
    _REGISTRY.pop(LowercaseTokenizer.files[0])


@pytest.mark.ci  # a SavedModel export (14 s)
def test_a_tokenizer_of_your_own_saves_loads_and_runs_in_an_export(registered, tmp_path):
    from conftest import build_tiny_model

    from zoo.export import export_saved_model

    tokenizer = LowercaseTokenizer(["the", "cat", "sat", "on", "mat"])
    assert tokenizer.encode("The CAT sat ÉTÉ") == [1, 4, 5, 6, 3, 2]
    model = build_tiny_model("gcnn", tokenizer=tokenizer)
    model.save_to_preset(str(tmp_path / "preset"))
    assert "lowercase_words.json" in os.listdir(tmp_path / "preset")
    loaded = zoo.load(str(tmp_path / "preset"))
    assert isinstance(loaded.tokenizer, LowercaseTokenizer) and loaded.tokenizer.words == tokenizer.words
    want = loaded.score(["The cat SAT on the mat"])[0]
    path = export_saved_model(loaded, str(tmp_path / "exports"), name="lower")
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(["The cat SAT on the mat"]))
    np.testing.assert_allclose(served["token_log_probs"].numpy()[0], want, rtol=1e-5, atol=1e-6)
    with open(os.path.join(path, "assets.extra", "zoo_export.json")) as f:
        assert json.load(f)["tokenizer"] == "lowercase-words"


def test_registering_refuses_what_cannot_be_read_back(registered):
    with pytest.raises(TypeError, match="takes a subclass of zoo.data.Tokenizer, got <class 'str'>"):
        register_tokenizer(str)

    class Nameless(Tokenizer):
        pass

    with pytest.raises(ValueError, match=r"^Nameless must set `kind` .* to be registered, got kind '' and files \(\)\.$"):
        register_tokenizer(Nameless)
    with pytest.raises(ValueError, match=r"got kind 'k' and files 'c5.json'\.$"):
        register_tokenizer(type("Stringy", (LowercaseTokenizer,), {"kind": "k", "files": "c5.json"}))
    with pytest.raises(ValueError, match=r"^Hijacker's file config.json is already the preset directory's; "):
        register_tokenizer(type("Hijacker", (LowercaseTokenizer,), {"kind": "h", "files": ("h.json", "config.json")}))
    with pytest.raises(ValueError, match=r"^Model's file tokenizer.model is already SubwordTokenizer's; "):
        register_tokenizer(type("Model", (LowercaseTokenizer,), {"kind": "m", "files": ("m.json", "tokenizer.model")}))
    with pytest.raises(ValueError, match=r"^Words's kind 'word' is already WordTokenizer's; give it a kind of its own\.$"):
        register_tokenizer(type("Words", (LowercaseTokenizer,), {"kind": "word", "files": ("w.json",)}))

    class Squatter(LowercaseTokenizer):
        kind, files = "squatter", ("vocabulary.txt",)

    with pytest.raises(ValueError, match=r"^Squatter's file lowercase_words.json is already LowercaseTokenizer's; "):
        register_tokenizer(type("Squatter", (LowercaseTokenizer,), {"kind": "squatter"}))
    with pytest.raises(ValueError, match=r"^Squatter's file vocabulary.txt is already WordTokenizer's; give it a "
                                         r"file of its own\.$"):
        register_tokenizer(Squatter)
    assert _REGISTRY["vocabulary.txt"] is WordTokenizer


def test_no_library_module_branches_on_a_tokenizers_kind():
    """The tokenizer modules themselves may; everything else calls the interface."""
    own = {"tokenizers.py", "vocab.py", "base_tokenizer.py", "graph_tokenizers.py"}
    pattern = re.compile(r"\.kind\s*[!=]=|\.kind\s+(not\s+)?in\b|(get|has)attr\(\s*[\w.]*tokenizer\w*\s*,")
    found = []
    for folder in ("zoo", "layers", "export"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name.endswith("_test.py") or (path.parent.name == "data" and path.name in own):
                continue
            found += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(path.read_text().split("\n"), 1)
                      if pattern.search(line)]
    assert found == []


def test_an_unregistered_tokenizer_is_refused_before_anything_is_written(tmp_path):
    from conftest import build_tiny_model

    model = build_tiny_model("gcnn", tokenizer=LowercaseTokenizer(["the"]))
    with pytest.raises(ValueError, match=r"^LowercaseTokenizer is not registered, so a preset directory could not "
                                         r"read it back: decorate the class with @zoo.data.register_tokenizer\.$"):
        model.save_to_preset(str(tmp_path / "preset"))
    assert not os.path.exists(tmp_path / "preset")


def test_a_graph_missing_members_is_refused_naming_them():
    class Minimal(LowercaseTokenizer):
        def build_graph(self):
            return type("Minimal", (), {"encode": None, "decode": None, "resources": []})()

    with pytest.raises(TypeError, match=r"^Minimal.build_graph\(\) returned Minimal, which lacks size, pad_id, bos_id, "
                                        r"eos_id, unk_id, normalize, token_texts, token_names, starts_word of "):
        Minimal(["a"]).encode("a")


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_a_used_tokenizer_pickles_and_refuses_a_forked_child(tokenizers, kind):
    import pickle

    tokenizer = tokenizers[kind]
    want = tokenizer.encode_batch(corpus()[:3])
    again = pickle.loads(pickle.dumps(tokenizer))  # what a spawned process receives
    assert again == tokenizer and again.encode_batch(corpus()[:3]) == want
    forked = pickle.loads(pickle.dumps(tokenizer))
    forked.__dict__.update(_graph=tokenizer.graph, _graph_pid=-1)  # as a child forked after a use sees it
    with pytest.raises(RuntimeError, match=r"ran TensorFlow in process -1, and TensorFlow cannot run in a child "
                                           r"forked from it: start child processes with multiprocessing's 'spawn'"):
        forked.encode("the")


def test_a_lone_surrogate_reads_as_one_replacement_character(tokenizers):
    char = tokenizers["char"]
    assert char.encode("a\udfffb") == char.encode("a\ufffdb")
    assert tokenizers["word"].normalize("the\ud800cat") == "the\ufffdcat"


def test_ids_must_be_one_row(tokenizers):
    with pytest.raises(ValueError, match=r"^Token ids must be one row of whole numbers, got an array of shape \(1, 2\)"):
        tokenizers["word"].decode(np.array([[3, 4]]))
    with pytest.raises(IndexError, match=r"^Token ids must be in \[0, \d+\), got -1…-1\.$"):
        tokenizers["word"].decode([-1])
