"""Bad input around a subword model, through the `zoo` command line: each gets one sentence and
exit code 2, and nothing already written (the run, its preset directory, an export) changes by a
byte. The run and the export are made once, from a tiny generated raw-text corpus."""

import os
import shutil

import pytest

import hashlib
from zoo.training.tokenization_test import raw_corpus
from zoo.tools.cli import main

TINY = ["--set", "dropout=0.0", "--set", "blocks=[[[3, 16]], [[3, 16]]]", "--set", "embedding_dim=16"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A raw corpus, a subword run trained on it (its best/ preset) and one export of that preset."""
    root = tmp_path_factory.mktemp("subword")
    data = raw_corpus(root / "raw")
    run = root / "run"
    assert main(["train", "--preset", "gcnn-ptb", "--data", data, "--out", str(run), "--epochs", "1",
                 "--steps-per-epoch", "2", "--batch-size", "4", "--seq-len", "8",
                 "--vocabulary-size", "320"] + TINY) == 0
    assert os.path.exists(run / "best" / "tokenizer.model")
    exports = root / "exports"
    assert main(["export", str(run / "best"), "--base", str(exports), "--name", "tiny"]) == 0
    (root / "empty").mkdir()
    (root / "empty" / "train.txt").write_text("\n \n\t\n")
    return {"root": root, "data": data, "run": run, "exports": exports}


def _digest(directory):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            h.update(os.path.relpath(os.path.join(root, name), directory).encode())
            h.update(open(os.path.join(root, name), "rb").read())
    return h.hexdigest()


def _state(written):
    return _digest(written["run"]), _digest(written["exports"])


def _broken(written, damage):
    """A copy of the run's preset directory with its tokenizer damaged."""
    broken = written["root"] / f"broken-{damage}"
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(written["run"] / "best", broken)
    model = broken / "tokenizer.model"
    if damage == "missing":
        model.unlink()
    elif damage == "corrupt":
        model.write_bytes(b"\x00 not a sentencepiece model")
    return str(broken)


TRAIN = ["train", "--preset", "gcnn-ptb", "--out", "{run}", "--epochs", "1", "--steps-per-epoch", "2",
         "--batch-size", "4", "--seq-len", "8"] + TINY


@pytest.mark.parametrize("argv, message", [
    (TRAIN + ["--data", "{data}", "--vocabulary-size", "10"], "is too small"),
    (TRAIN + ["--data", "{data}", "--vocabulary-size", "1000000"], "more than this corpus can supply"),
    (TRAIN + ["--data", "{empty}"], "is empty"),
    (TRAIN + ["--data", "ptb", "--tokenizer", "subword"], "published protocol fixes its word vocabulary"),
    (["export", "{missing}", "--base", "{exports}", "--name", "tiny"], "tokenizer.model"),
    (["export", "{corrupt}", "--base", "{exports}", "--name", "tiny"], "tokenizer.model"),
    (["evaluate", "{missing}", "--data", "{data}"], "tokenizer.model"),
    (["score", "{corrupt}", "the cat"], "tokenizer.model"),
    (["generate", "{missing}", "the cat"], "tokenizer.model"),
])
def test_bad_input_is_one_sentence_and_nothing_written_changes(argv, message, written, capsys):
    before = _state(written)
    names = {"run": str(written["run"]), "data": written["data"], "empty": str(written["root"] / "empty"),
             "exports": str(written["exports"])}
    if any("{missing}" in a for a in argv):
        names["missing"] = _broken(written, "missing")
    if any("{corrupt}" in a for a in argv):
        names["corrupt"] = _broken(written, "corrupt")
    for key, value in names.items():
        argv = [a.replace("{" + key + "}", value) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("zoo: error: ") and message in err, err
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1, err
    assert _state(written) == before
    assert sorted(os.listdir(written["exports"] / "tiny")) == ["1"]
