"""The TFDS builders load offline: PTB from its package, WikiText-103 and 1BW from stand-in files."""

import re
import socket

import pytest
import tensorflow_datasets as tfds

import zoo.data.tfds_builders  # noqa: F401  (registers zoo_ptb, zoo_wikitext103, zoo_lm1b)
from zoo.data.corpus import read_lines

SPLITS = ["train", "validation", "test"]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Refuses, and remembers, any attempt to resolve a host or open a connection."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield
    # TFDS catches some errors on its own, so check the record rather than rely on a raise.
    assert attempts == []


def load(name, data_dir, split=SPLITS, manual_dir=None):
    """The texts of each split, loaded the offline way the module docstring describes."""
    config = tfds.download.DownloadConfig(manual_dir=manual_dir, try_download_gcs=False)
    datasets = tfds.load(name, split=split, data_dir=str(data_dir), try_gcs=False,
                         download_and_prepare_kwargs={"download_config": config})
    if isinstance(split, str):
        return [x["text"].decode("utf-8") for x in tfds.as_numpy(datasets)]
    return {s: [x["text"].decode("utf-8") for x in tfds.as_numpy(d)]
            for s, d in zip(split, datasets)}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.ci
def test_ptb_validation_is_read_lines_in_order(tmp_path):
    expected = read_lines("ptb", "valid")
    texts = load("zoo_ptb", tmp_path, split="validation")
    assert len(texts) == len(expected) == 3370
    assert texts[0] == expected[0]
    assert texts[-1] == expected[-1]  # shuffling is off: the stream keeps its order
    builder = tfds.builder("zoo_ptb", data_dir=str(tmp_path))
    assert builder.info.splits["train"].num_examples == len(read_lines("ptb", "train"))
    assert builder.info.splits["test"].num_examples == len(read_lines("ptb", "test"))


def test_wikitext103_reads_the_manual_dir(tmp_path):
    manual = tmp_path / "manual"
    write(manual / "wiki.train.tokens",
          "\n = Valkyria Chronicles III = \n\n Senjō no Valkyria 3 : <unk> Chronicles \n"
          "\n = = Gameplay = = \n\n As with previous games , the player \n")
    write(manual / "wiki.valid.tokens", "\n = Homarus gammarus = \n\n Homarus gammarus is a lobster \n")
    write(manual / "wiki.test.tokens", " = Robert Boulter = \n\n")
    texts = load("zoo_wikitext103", tmp_path / "data", manual_dir=str(manual))
    assert texts == {
        "train": ["= Valkyria Chronicles III =", "Senjō no Valkyria 3 : <unk> Chronicles",
                  "= = Gameplay = =", "As with previous games , the player"],
        "validation": ["= Homarus gammarus =", "Homarus gammarus is a lobster"],
        "test": ["= Robert Boulter ="],
    }


def test_lm1b_reads_the_standard_layout(tmp_path):
    manual = tmp_path / "manual"
    train, heldout = (manual / "training-monolingual.tokenized.shuffled",
                      manual / "heldout-monolingual.tokenized.shuffled")
    write(train / "news.en-00002-of-00100", "third sentence .\n\nfourth sentence .\n")
    write(train / "news.en-00001-of-00100", "first sentence .\nsecond sentence .\n")
    write(train / "README", "not a shard\n")
    write(heldout / "news.en.heldout-00000-of-00050", "a test sentence .\n")
    write(heldout / "news.en.heldout-00001-of-00050", "a validation sentence .\nanother one .\n")
    write(heldout / "news.en.heldout-00002-of-00050", "an unused held-out sentence .\n")
    texts = load("zoo_lm1b", tmp_path / "data", manual_dir=str(manual))
    assert texts == {
        "train": ["first sentence .", "second sentence .", "third sentence .", "fourth sentence ."],
        "validation": ["a validation sentence .", "another one ."],
        "test": ["a test sentence ."],
    }


def test_missing_manual_dir_is_named(tmp_path):
    nowhere = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=f"zoo_wikitext103: missing {re.escape(str(nowhere))}"):
        load("zoo_wikitext103", tmp_path / "data", manual_dir=str(nowhere))


def test_missing_file_is_named(tmp_path):
    manual = tmp_path / "manual"
    write(manual / "training-monolingual.tokenized.shuffled" / "news.en-00001-of-00100", "a .\n")
    write(manual / "heldout-monolingual.tokenized.shuffled" / "news.en.heldout-00000-of-00050", "b .\n")
    missing = manual / "heldout-monolingual.tokenized.shuffled" / "news.en.heldout-00001-of-00050"
    with pytest.raises(FileNotFoundError, match=f"zoo_lm1b: missing {re.escape(str(missing))}"):
        load("zoo_lm1b", tmp_path / "data", manual_dir=str(manual))
