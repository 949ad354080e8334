"""`zoo.load(..., weights=...)` from every source `zoo.weights` supports: an http server on
localhost (checksums, the cache, errors), `tf.io.gfile` paths, the shipped trained weights, and
the one-line random-weights notice."""

import ast
import collections
import fnmatch
import functools
import hashlib
import http.server
import os
import re
import socket
import threading

import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import registry
from zoo import weights as sources
from zoo.data import WordTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY = {"vocabulary_size": 50, "embedding_dim": 8, "blocks": [[[3, 8]]]}


def tiny(weights="random", **kwargs):
    return zoo.load("gcnn-ptb", weights=weights, **TINY, **kwargs)


def same_weights(a, b):
    return len(a.get_weights()) == len(b.get_weights()) and all(
        np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_sentence(message):
    assert "\n" not in message and message.endswith("."), message
    return message


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Two tiny models' weights under the same file name at two addresses, served on localhost;
    `requests[path]` counts the GETs of each path."""
    root = tmp_path_factory.mktemp("served")
    (root / "other").mkdir()
    first, second = tiny(), tiny()
    assert not same_weights(first, second)
    first.save_weights(str(root / "tiny.weights.h5"))
    second.save_weights(str(root / "other" / "tiny.weights.h5"))
    requests = collections.Counter()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            requests[self.path] += 1
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    yield {"root": root, "base": base, "requests": requests, "models": {"/tiny.weights.h5": first,
                                                                       "/other/tiny.weights.h5": second}}
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Every test downloads into its own cache directory (never ~/.cache)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("ZOO_CACHE_DIR", str(directory))
    return directory


def cached_files(directory):
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_download_is_checked_cached_and_reused_without_a_request(served, cache):
    url, path = served["base"] + "/tiny.weights.h5", "/tiny.weights.h5"
    digest = sha256(served["root"] / "tiny.weights.h5")
    before = served["requests"][path]
    model = tiny(weights=url, weights_sha256=digest.upper())  # hex digits in either case
    assert same_weights(model, served["models"][path])
    assert served["requests"][path] == before + 1
    name = hashlib.sha256(url.encode()).hexdigest()[:12] + "-tiny.weights.h5"
    assert cached_files(cache) == [name]  # no temporary file left beside it
    assert sha256(cache / name) == digest

    again = tiny(weights=url, weights_sha256=digest)
    assert same_weights(again, served["models"][path])
    assert served["requests"][path] == before + 1  # the cached file, no request


def test_wrong_checksum_is_one_sentence_and_keeps_nothing(served, cache):
    url = served["base"] + "/tiny.weights.h5"
    actual, wrong = sha256(served["root"] / "tiny.weights.h5"), "ab" * 32
    with pytest.raises(ValueError) as error:
        tiny(weights=url, weights_sha256=wrong)
    message = one_sentence(str(error.value))
    assert url in message and actual in message and wrong in message
    assert cached_files(cache) == []


def test_a_cached_file_that_does_not_match_is_downloaded_again(served, cache):
    url, path = served["base"] + "/tiny.weights.h5", "/tiny.weights.h5"
    stale = sources.cache_path(url)
    assert os.path.dirname(stale) == str(cache)
    os.makedirs(cache)
    with open(stale, "wb") as f:
        f.write(b"not the weights")
    before = served["requests"][path]
    model = tiny(weights=url, weights_sha256=sha256(served["root"] / "tiny.weights.h5"))
    assert served["requests"][path] == before + 1
    assert same_weights(model, served["models"][path])
    assert sha256(stale) == sha256(served["root"] / "tiny.weights.h5")
    assert cached_files(cache) == [os.path.basename(stale)]


def test_two_addresses_with_the_same_file_name_do_not_collide(served, cache):
    for path in ("/tiny.weights.h5", "/other/tiny.weights.h5"):
        digest = sha256(served["root"] / path.lstrip("/"))
        assert same_weights(tiny(weights=served["base"] + path, weights_sha256=digest), served["models"][path])
    files = cached_files(cache)
    assert len(files) == 2 and all(f.endswith("-tiny.weights.h5") for f in files)


def test_an_address_needs_its_checksum_and_a_weights_file_name(served, cache):
    url = served["base"] + "/tiny.weights.h5"
    before = sum(served["requests"].values())
    with pytest.raises(ValueError, match=r"need their checksum.*weights_sha256=") as error:
        tiny(weights=url)
    one_sentence(str(error.value))
    with pytest.raises(ValueError, match=r"weights_sha256 must be a SHA-256 as 64 hexadecimal digits, got 'abc'\.$"):
        tiny(weights=url, weights_sha256="abc")
    with pytest.raises(ValueError, match=r"must name a \.weights\.h5 file, got .*download\?id=3"):
        tiny(weights=served["base"] + "/download?id=3", weights_sha256="ab" * 32)
    assert sum(served["requests"].values()) == before  # nothing was requested
    assert cached_files(cache) == []


def test_a_missing_file_is_one_sentence_naming_the_address(served, cache):
    url = served["base"] + "/missing.weights.h5"
    with pytest.raises(ValueError) as error:
        tiny(weights=url, weights_sha256="ab" * 32)
    assert one_sentence(str(error.value)) == f"Could not download {url}: HTTP 404 File not found."
    assert cached_files(cache) == []


def test_an_unreachable_server_is_one_sentence_naming_the_address(cache):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/tiny.weights.h5"
    with pytest.raises(ValueError) as error:
        tiny(weights=url, weights_sha256="ab" * 32)
    assert one_sentence(str(error.value)).startswith(f"Could not download {url}: ")
    assert cached_files(cache) == []


def test_the_cache_directory_comes_from_zoo_cache_dir_or_home(served, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("ZOO_CACHE_DIR", str(elsewhere))
    url = served["base"] + "/tiny.weights.h5"
    tiny(weights=url, weights_sha256=sha256(served["root"] / "tiny.weights.h5"))
    assert len(cached_files(elsewhere)) == 1
    monkeypatch.delenv("ZOO_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert sources.cache_dir() == str(tmp_path / "home" / ".cache" / "zoo" / "weights")


def test_local_paths_file_addresses_and_gfile_paths(served, tmp_path):
    expected = served["models"]["/tiny.weights.h5"]
    local = served["root"] / "tiny.weights.h5"
    digest = sha256(local)
    assert same_weights(tiny(weights=str(local)), expected)
    assert same_weights(tiny(weights=local, weights_sha256=digest), expected)  # a pathlib.Path, checked
    assert same_weights(tiny(weights=local.as_uri()), expected)  # file://
    with pytest.raises(ValueError, match=f"has SHA-256 {digest}, not the expected {'ab' * 32}\\.$"):
        tiny(weights=str(local), weights_sha256="ab" * 32)

    pointer = tmp_path / "pointer.weights.h5"  # what a Git LFS checkout without LFS holds
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\n")
    with pytest.raises(ValueError, match=r"pointer\.weights\.h5' is not a readable weights file") as error:
        tiny(weights=str(pointer))
    one_sentence(str(error.value))

    # ram:// is a tf.io.gfile file system that is not the local disk, as gs:// is
    remote = "ram://zoo-weights-test/tiny.weights.h5"
    tf.io.gfile.makedirs("ram://zoo-weights-test")
    tf.io.gfile.copy(str(local), remote, overwrite=True)
    assert same_weights(tiny(weights=remote, weights_sha256=digest), expected)
    with pytest.raises(ValueError, match=f"has SHA-256 {digest}, not the expected {'ab' * 32}\\.$"):
        tiny(weights=remote, weights_sha256="ab" * 32)

    # a preset directory on gfile brings its tokenizer too
    vocab = WordTokenizer.build(["the cat sat", "a dog ran"])
    expected.tokenizer = vocab
    directory = expected.save_to_preset(str(tmp_path / "preset"))
    expected.tokenizer = None
    tf.io.gfile.makedirs("ram://zoo-weights-test/preset")
    for name in os.listdir(directory):
        tf.io.gfile.copy(os.path.join(directory, name), f"ram://zoo-weights-test/preset/{name}", overwrite=True)
    model = tiny(weights="ram://zoo-weights-test/preset")
    assert same_weights(model, expected) and model.tokenizer == vocab

    with pytest.raises(ValueError) as error:
        tiny(weights="ram://zoo-weights-test/missing.weights.h5")
    assert one_sentence(str(error.value)).startswith("No weights at 'ram://zoo-weights-test/missing.weights.h5'")
    with pytest.raises(ValueError) as error:  # one sentence naming the address and its unknown scheme
        tiny(weights="nosuch://x.weights.h5")
    message = one_sentence(str(error.value))
    assert "nosuch://x.weights.h5" in message and "'nosuch'" in message


def test_a_preset_directory_with_a_weights_file_keeps_its_vocabulary(served, tmp_path):
    model = tiny()
    model.tokenizer = WordTokenizer.build(["the cat sat"])
    directory = model.save_to_preset(str(tmp_path / "preset"))
    loaded = zoo.load(directory, weights=str(served["root"] / "tiny.weights.h5"))
    assert same_weights(loaded, served["models"]["/tiny.weights.h5"])
    assert loaded.tokenizer == model.tokenizer
    fresh = zoo.load(directory, weights="random")
    assert not same_weights(fresh, model) and fresh.tokenizer == model.tokenizer


def test_trained_weights_are_refused_in_one_sentence_when_none_ship(monkeypatch):
    monkeypatch.setattr(sources, "TRAINED", {})
    with pytest.raises(ValueError) as error:
        zoo.load("gcnn-14", weights="trained")  # refused before its 223M parameters are built
    assert "'gcnn-14'" in one_sentence(str(error.value)) and "no preset has trained weights" in str(error.value)
    monkeypatch.setattr(sources, "TRAINED", {
        "lstm-ptb": sources.Trained("trained_weights/x.weights.h5", "ab" * 32),
        "gcnn-ptb": sources.Trained("trained_weights/y.weights.h5", "cd" * 32)})
    with pytest.raises(ValueError) as error:
        zoo.load("gcnn-14", weights="trained")
    # the presets that have them, sorted
    assert one_sentence(str(error.value)).endswith("presets with trained weights: 'gcnn-ptb', 'lstm-ptb'.")
    with pytest.raises(ValueError, match=r"the trained weights carry their own\.$"):
        zoo.load("gcnn-ptb", weights="trained", weights_sha256="ab" * 32)
    with pytest.raises(ValueError, match=r"there is no weights file to check\.$"):
        zoo.load("gcnn-ptb", weights_sha256="ab" * 32)


def test_trained_weights_load_from_the_package_in_float16(served, tmp_path, monkeypatch):
    """One entry in TRAINED and its file are all a preset needs; float16 weights load into the
    float32 model, and a damaged file is refused by its checksum."""
    source = served["root"] / "tiny.weights.h5"
    shipped = tmp_path / "package" / "trained_weights" / "gcnn-ptb.weights.h5"
    shipped.parent.mkdir(parents=True)
    sources.save_float16(str(source), str(shipped))
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(tmp_path / "package"))
    monkeypatch.setattr(sources, "TRAINED", {"gcnn-ptb": sources.Trained("trained_weights/gcnn-ptb.weights.h5",
                                                                         sha256(shipped))})
    model = tiny(weights="trained")
    expected = served["models"]["/tiny.weights.h5"].get_weights()
    for got, want in zip(model.get_weights(), expected, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want.astype(np.float16).astype(np.float32))
    assert not all(np.array_equal(g, w) for g, w in zip(model.get_weights(), expected))  # really float16

    with open(shipped, "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError) as error:
        tiny(weights="trained")
    assert one_sentence(str(error.value)).startswith("The trained weights of preset 'gcnn-ptb' at ")
    os.remove(shipped)
    with pytest.raises(ValueError, match=r"missing from the installed package .*; reinstall the zoo\.$"):
        tiny(weights="trained")


def package_data_globs():
    """setup.py's `package_data` globs for the `zoo` package, read off its source."""
    tree = ast.parse(open(os.path.join(ROOT, "setup.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "package_data":
            return ast.literal_eval(node.value)["zoo"]
    raise AssertionError("setup.py has no package_data")


def test_every_shipped_trained_entry_is_complete():
    """Each entry: a registered preset, a well-formed checksum, a file that setup.py installs and
    that matches the checksum."""
    assert sources.TRAINED
    globs = package_data_globs()
    for preset, (path, digest) in sources.TRAINED.items():
        assert preset in registry.PRESETS
        assert re.fullmatch(r"[0-9a-f]{64}", digest), preset
        assert any(fnmatch.fnmatch(path, glob) for glob in globs), f"{path} is not installed by setup.py's {globs}"
        assert sha256(os.path.join(sources.PACKAGE_DIR, path)) == digest, preset


def test_random_weights_are_announced_once_per_preset(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sources, "_NOTICED", set())
    monkeypatch.setattr(sources, "TRAINED", {})
    caplog.set_level("WARNING", logger="zoo.weights")
    tiny(weights="random")
    assert caplog.messages == []
    model = tiny(weights=None)
    tiny(weights=None)
    assert [(r.name, r.levelname) for r in caplog.records] == [("zoo.weights", "WARNING")]
    assert caplog.messages == ['gcnn-ptb: random weights (no trained weights ship for this preset; '
                               'weights="trained" lists the ones that do).']
    caplog.clear()
    zoo.load(model.save_to_preset(str(tmp_path / "preset")))  # a preset directory: its own weights
    assert caplog.messages == []


@pytest.mark.ci  # a fresh Python process (8 s)
def test_with_no_logging_set_up_the_notice_still_reaches_stderr(tmp_path):
    """A notebook or a script that never configures logging still sees the random-weights line."""
    import subprocess
    import sys

    code = ("import zoo; zoo.load('gcnn-ptb', embedding_dim=8, blocks=[[[4, 8]]], vocabulary_size=50)")
    result = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "gcnn-ptb: random weights (" in result.stderr and result.stdout == ""



def test_save_float16_halves_the_file_and_loads_back(tmp_path):
    model = zoo.load("gcnn-ptb", weights="random", embedding_dim=8, blocks=[[[4, 8]]], vocabulary_size=50)
    full = str(tmp_path / "m.weights.h5")
    model.save_weights(full)
    half = zoo.weights.save_float16(full, str(tmp_path / "h.weights.h5"))
    back = zoo.load("gcnn-ptb", weights=half, embedding_dim=8, blocks=[[[4, 8]]], vocabulary_size=50)
    for a, b in zip(model.get_weights(), back.get_weights(), strict=True):
        assert b.dtype == np.float32
        np.testing.assert_array_equal(b, a.astype(np.float16).astype(np.float32))


def test_the_download_is_keras_get_file_s_into_a_scratch_folder_of_the_cache(served, cache, monkeypatch):
    import keras

    calls, real = [], keras.utils.get_file
    monkeypatch.setattr(keras.utils, "get_file", lambda **kw: calls.append(kw) or real(**kw))
    url = served["base"] + "/other/tiny.weights.h5"
    tiny(weights=url, weights_sha256=sha256(served["root"] / "other" / "tiny.weights.h5"))
    assert [c["origin"] for c in calls] == [url]
    assert os.path.dirname(calls[0]["cache_dir"]) == str(cache)  # the scratch folder, gone afterwards
    assert cached_files(cache) == [os.path.basename(sources.cache_path(url))]
