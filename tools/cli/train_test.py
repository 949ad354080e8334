"""`zoo train`: a short run's history, best preset and logs; its flags reach TrainConfig by field
name; bad input is one sentence with exit code 2. (The run: tools/cli/conftest.py's `trained`.)

A subword run (ci: trained once, by a module fixture, from a tiny generated raw-text corpus): bad
input around it, through `zoo train` and the subcommands that load its preset directory, gets one
sentence and exit code 2, and nothing already written (the run, its preset directory, an export)
changes by a byte; `--weights trained` refuses what it cannot fine-tune and fine-tunes a preset
that ships as a directory with its tokenizer."""

import hashlib
import json
import os
import shutil

import pytest

import zoo
from tests.cli_checks import one_sentence_error
from zoo.tools.cli import main, parser
from zoo.tools.cli.train import overrides, train_config
from zoo.training.tokenization_test import raw_corpus


def test_train_writes_history_best_preset_and_logs(trained, capsys):
    history = json.load(open(os.path.join(trained, "history.json")))
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["val_perplexity"] < history[0]["val_perplexity"]
    assert os.path.isdir(os.path.join(trained, "logs"))
    best = min(history, key=lambda h: h["val_perplexity"])
    model = zoo.load(os.path.join(trained, "best"))
    assert model.tokenizer is not None and len(model.tokenizer) == model.vocabulary_size
    assert best["best"] is True


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--preset", "gcnn-15", "--data", "ptb", "--out", "{tmp}/x"], "Unknown preset 'gcnn-15'"),
        (["train", "--preset", "gcnn-ptb", "--data", "{tmp}/nowhere", "--out", "{tmp}/x"], "does not exist"),
        (["train", "--preset", "gcnn-ptb", "--data", "{tmp}/empty.txt", "--out", "{tmp}/x"], "is empty"),
        (["train", "--preset", "gcnn-ptb", "--data", "ptb", "--out", "{tmp}/x",
          "--set", "blocks=[[[0, 8]]]"], "kernel_size must be an integer >= 1, got 0"),
        (["train", "--preset", "gcnn-ptb", "--out", "{tmp}/x", "--set", "dropout"], "--set takes KEY=VALUE"),
    ],
)
def test_bad_input_gives_one_sentence_and_exit_code_2(argv, message, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n  \n")
    assert message in one_sentence_error([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)


def test_training_a_quantized_preset_directory_is_one_sentence_and_writes_nothing(tmp_path, capsys):
    # int8 weights have no gradient: zoo train's own loop would change only the biases
    lines = ["the cat sat on the mat", "a dog sat on a log", "the dog saw the cat"] * 4
    data = tmp_path / "text"
    data.mkdir()
    for split in ("train", "valid"):
        (data / f"{split}.txt").write_text("\n".join(lines) + "\n")
    tokenizer = zoo.data.WordTokenizer.build(lines)
    lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=len(tokenizer), embedding_dim=8, blocks=[[[3, 8]]])
    lm.tokenizer = tokenizer
    lm.quantize("int8")
    quantized = tmp_path / "quantized"
    lm.save_to_preset(str(quantized))
    before = _digest(quantized)
    run = tmp_path / "run"
    common = ["--data", str(data), "--out", str(run), "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "2",
              "--seq-len", "4"]
    for start in (["--preset", str(quantized)], ["--preset", "gcnn-ptb", "--weights", str(quantized)]):
        error = one_sentence_error(["train"] + start + common, capsys)
        assert f"{str(quantized)!r} holds int8 weights (model.quantize), which have no gradient" in error, error
        assert not run.exists()
    assert _digest(quantized) == before
    # refused before a line of progress is printed
    from zoo.training.trainer import starting_point

    logged = []
    for preset, weights in ((str(quantized), None), ("gcnn-ptb", str(quantized))):
        with pytest.raises(ValueError, match="holds int8 weights"):
            starting_point(preset, weights, log=logged.append)
    assert logged == []


def test_a_preset_directory_as_weights_is_said_to_bring_its_own_model(tmp_path):
    """`--preset gcnn-14 --weights DIR` trains DIR's model; before, the log did not say that the
    preset name only gives the training defaults."""
    from zoo.training.trainer import starting_point

    lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    lm.tokenizer = zoo.data.WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)])
    directory = lm.save_to_preset(str(tmp_path / "mine"))
    logged = []
    preset, info, _ = starting_point("gcnn-14", directory, log=logged.append)
    spec = zoo.registry.get_preset("gcnn-14")
    assert preset == directory
    assert info.train_defaults == {"global_batch_size": spec.batch_size, "seq_len": spec.seq_len}
    assert logged == [f"Starting from {directory}: its own model and tokenizer; gcnn-14 gives only the training "
                      "defaults (batch size, window length), not the model."]


def test_every_train_config_field_is_a_flag_of_zoo_train():
    import dataclasses

    from zoo.training import TrainConfig

    args = parser().parse_args(["train", "--preset", "gcnn-ptb", "--out", "run"])
    assert {f.name for f in dataclasses.fields(TrainConfig)} <= set(vars(args))
    # unset flags leave TrainConfig's own defaults
    assert train_config(args) == TrainConfig()


def test_train_flags_reach_the_train_config_by_field_name():
    args = parser().parse_args(["train", "--preset", "gcnn-ptb", "--out", "run", "--batch-size", "8",
                                "--capacity-factor", "1.5", "--expert-parallel", "--tokenizer", "char"])
    config = train_config(args)
    assert (config.global_batch_size, config.capacity_factor, config.expert_parallel, config.tokenizer) == \
        (8, 1.5, True, "char")


def test_set_values_are_read_as_json_else_kept_as_text():
    assert overrides(["dropout=0.25", "blocks=[[[3, 16]]]", "name=my run", "note=a=b", "flag=true"]) == {
        "dropout": 0.25, "blocks": [[[3, 16]]], "name": "my run", "note": "a=b", "flag": True}
    assert overrides(None) == {}


# ---- a subword run (ci) --------------------------------------------------------------------------
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


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
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


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
@pytest.mark.parametrize("content, message", [
    (b"a fine line\nbad \xff\xfe bytes\n", "is not UTF-8: line 2, byte 5 is 0xff"),
    (b"\x00\x01\n\x07\n  \n", "has no usable line"),
])
def test_a_corpus_of_bad_bytes_or_no_usable_line_is_one_sentence_and_writes_nothing(
        content, message, written, tmp_path, capsys):
    data = tmp_path / "bad"
    data.mkdir()
    for split in ("train", "valid"):
        (data / f"{split}.txt").write_bytes(content)
    run = tmp_path / "run"
    code = main([a.replace("{run}", str(run)) for a in TRAIN] + ["--data", str(data)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("zoo: error: ") and message in err and err.count("\n") == 1, err
    assert not run.exists()


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
def test_weights_trained_where_none_ship_or_on_a_directory_is_one_sentence(written, tmp_path, capsys):
    run = tmp_path / "run"
    argv = [a.replace("{run}", str(run)) for a in TRAIN] + ["--data", written["data"], "--weights", "trained"]
    assert main([a.replace("gcnn-ptb", "gcnn-14") for a in argv]) == 2
    err = capsys.readouterr().err
    assert "No trained weights ship for preset 'gcnn-14'; presets with trained weights: 'gcnn-en'" in err
    assert err.count("\n") == 1
    assert main([a.replace("gcnn-ptb", str(written["run"] / "best")) for a in argv]) == 2
    assert "takes a preset name; the preset directory" in capsys.readouterr().err
    assert not run.exists()


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
def test_weights_trained_fine_tunes_the_shipped_preset_directory_with_its_tokenizer(written, tmp_path, monkeypatch):
    """A preset that ships as a directory (gcnn-en's way) fine-tunes from its weights and keeps its
    tokenizer: with a learning rate of 0 the run's model is the shipped one, byte for byte."""
    from zoo import weights as sources

    package = tmp_path / "package"
    (package / "trained_weights").mkdir(parents=True)
    digest = sources.save_trained_directory(str(written["run"] / "best"), str(package / "trained_weights" / "gcnn-en"))
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(package))
    monkeypatch.setitem(sources.TRAINED, "gcnn-en", sources.Trained("trained_weights/gcnn-en/model.weights.h5", digest))
    shipped = zoo_load(str(package / "trained_weights" / "gcnn-en"))
    run = tmp_path / "tuned"
    assert main(["train", "--preset", "gcnn-en", "--weights", "trained", "--data", written["data"], "--out", str(run),
                 "--steps", "1", "--batch-size", "4", "--seq-len", "8",
                 "--set", 'optimizer={"name": "sgd", "learning_rate": 0.0}']) == 0
    for name in ("tokenizer.model", "tokenizer.json"):
        assert (run / "final" / name).read_bytes() == (package / "trained_weights" / "gcnn-en" / name).read_bytes()
    import numpy as np
    import zoo

    tuned = zoo.load(str(run / "final"))
    for a, b in zip(tuned.get_weights(), shipped.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # without --set optimizer=..., the preset's fine-tuning optimizer, kept in the run's presets
    assert main(["train", "--preset", "gcnn-en", "--weights", "trained", "--data", written["data"], "--out",
                 str(tmp_path / "default"), "--steps", "1", "--batch-size", "4", "--seq-len", "8"]) == 0
    assert zoo.load(str(tmp_path / "default" / "final")).optimizer_config == zoo.registry.fine_tune_optimizer("gcnn-en")
    # a learned-tokenizer flag would change the ids the weights read: refused
    assert main(["train", "--preset", "gcnn-en", "--weights", "trained", "--data", written["data"], "--out",
                 str(tmp_path / "other"), "--steps", "1", "--vocabulary-size", "300"]) == 2


def zoo_load(path):
    import zoo

    return zoo.load(path)


# ---- --extend-tokenizer (ci: starts from the subword run's best/) ---------------------------------
def technical_corpus(root):
    from zoo.data.tokenizers_test import TECHNICAL

    root.mkdir()
    (root / "train.txt").write_text("\n".join(TECHNICAL) + "\n")
    (root / "valid.txt").write_text("\n".join(TECHNICAL[:4]) + "\n")
    return str(root)


EXTEND = ["--steps", "2", "--batch-size", "4", "--seq-len", "8"]


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
def test_extend_tokenizer_fine_tunes_with_new_ids_and_never_changes_the_start(written, tmp_path, capsys):
    start = written["run"] / "best"
    before = _digest(start)
    data, run = technical_corpus(tmp_path / "tech"), tmp_path / "run"
    argv = ["train", "--preset", str(start), "--data", data, "--out", str(run), "--extend-tokenizer", "20"] + EXTEND
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Pieces per word of the training text: " in out and "Added " in out
    assert _digest(start) == before
    first = zoo.load(str(start)).tokenizer
    extended, final = zoo.load(str(run / "extended")), zoo.load(str(run / "final"))
    assert final.tokenizer == extended.tokenizer and 0 < final.tokenizer.added_pieces <= 20
    assert len(final.tokenizer) == len(first) + final.tokenizer.added_pieces
    assert final.tokenizer.pieces[:len(first)] == first.pieces
    record = json.loads((run / "extended" / "extension.json").read_text())
    assert record["added"] == final.tokenizer.added_pieces
    assert record["pieces_per_word"]["after"] < record["pieces_per_word"]["before"]
    # started again with the same arguments: the extended start is reused, not made again
    mark = _digest(run / "extended")
    assert main(argv[:-6] + ["--steps", "3", "--batch-size", "4", "--seq-len", "8"]) == 0
    assert "the tokenizer extended when this run began" in capsys.readouterr().out
    assert _digest(run / "extended") == mark
    # started again with another N: refused in words (no Python dicts), the extended start kept
    err = one_sentence_error(argv[:-8] + ["--extend-tokenizer", "7"] + EXTEND, capsys)
    assert (f"was started from {start} with --extend-tokenizer 20 and holds its extended model; give a new --out "
            f"to start from {start} with --extend-tokenizer 7") in err and "{" not in err, err
    assert _digest(run / "extended") == mark
    # the run's own preset, extended already, is refused, and nothing is written
    finals = _digest(run / "final")
    other = tmp_path / "again"
    err = one_sentence_error(["train", "--preset", str(run / "final"), "--data", data, "--out", str(other),
                              "--extend-tokenizer", "5"] + EXTEND, capsys)
    assert "extended already" in err
    assert not other.exists() and _digest(run / "final") == finals


@pytest.mark.ci  # trains a subword run first (the module fixture `written`)
@pytest.mark.parametrize("start, n, message", [
    ("best", "0", "extend_tokenizer must be an integer >= 1, got 0"),
    ("best", "-4", "extend_tokenizer must be an integer >= 1, got -4"),
    ("best", "2147483400", "int32"),
    ("gcnn-ptb", "5", "extends a trained model's tokenizer: add --weights trained"),
    ("word", "5", "Only a subword (SentencePiece) tokenizer can be extended"),
])
def test_extend_tokenizer_bad_input_is_one_sentence(start, n, message, written, tmp_path, capsys, tiny_model,
                                                    word_tokenizer):
    if start == "best":
        start = str(written["run"] / "best")
    elif start == "word":
        start = tiny_model("gcnn", tokenizer=word_tokenizer).save_to_preset(str(tmp_path / "word"))
    before = _digest(start) if os.path.isdir(start) else None
    run = tmp_path / "run"
    err = one_sentence_error(["train", "--preset", start, "--data", technical_corpus(tmp_path / "tech"), "--out",
                              str(run), "--extend-tokenizer", n] + EXTEND, capsys)
    assert message in err
    assert not run.exists()
    if before:
        assert _digest(start) == before


@pytest.mark.parametrize("command, again", [("train", True), ("presets", False)])
def test_ctrl_c_is_one_line_not_a_traceback(monkeypatch, capsys, command, again):
    """Before, Ctrl-C during `zoo train` printed about 60 lines of KeyboardInterrupt traceback."""
    from zoo.tools import cli

    def interrupted(args):
        raise KeyboardInterrupt

    argv = ["train", "--preset", "gcnn-ptb", "--out", "run"] if command == "train" else ["presets"]
    real = cli.parser

    def parser():
        p = real()
        p._subparsers._group_actions[0].choices[command].set_defaults(func=interrupted)
        return p

    monkeypatch.setattr(cli, "parser", parser)
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().startswith("zoo: interrupted")
    assert ("resumes the run from its last checkpoint" in err) == again


def test_an_out_below_a_file_and_a_negative_seed_are_one_sentence_before_anything_runs(tmp_path, capsys):
    """Before: a FileExistsError's traceback, and a seed refused by Keras only after the
    tokenizer was learned."""
    taken = tmp_path / "afile"
    taken.write_text("mine")
    err = one_sentence_error(["train", "--preset", "gcnn-ptb", "--out", str(taken / "run"), "--steps", "1"], capsys)
    assert f"The run directory {taken / 'run'} cannot be made: {taken} is a file" in err, err
    err = one_sentence_error(["train", "--preset", "gcnn-ptb", "--out", str(tmp_path / "r"), "--seed", "-1"], capsys)
    assert "seed must be an integer in [0, 4294967295], got -1." in err, err
    assert taken.read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["afile"]


def test_a_worker_that_is_not_the_chief_does_not_print_its_own_summary(monkeypatch, capsys):
    """Before, worker 1 of a two-worker run printed 'Best model: OUT/best (epoch ?)', or after a
    resume an epoch and perplexity that were not the run's."""
    import types

    import tensorflow as tf

    import zoo.training
    from zoo.tools.cli import train as command

    cluster = tf.train.ClusterSpec({"worker": ["localhost:1", "localhost:2"]})
    resolver = types.SimpleNamespace(task_type="worker", task_id=1, cluster_spec=lambda: cluster)
    model = types.SimpleNamespace(distribute_strategy=types.SimpleNamespace(cluster_resolver=resolver))
    history = [{"epoch": 1, "step": 10, "val_perplexity": 99.0}]
    monkeypatch.setattr(zoo.training, "train", lambda *a, **kw: (model, history))
    args = parser().parse_args(["train", "--preset", "gcnn-ptb", "--out", "run"])
    command.run(args)
    assert capsys.readouterr().out == ("Done: worker 1 of the cluster; the chief wrote run/best and gives the run's "
                                       "figures.\n")
    resolver.task_id = 0  # the chief (worker 0 where the cluster has no chief task) prints the summary
    command.run(args)
    assert capsys.readouterr().out.startswith("Best model: run/best (epoch 1)\nvalidation perplexity (stream): 99.00")


def test_a_missing_preset_directory_or_weights_path_and_a_run_directory_say_what_is_wrong(tmp_path, capsys):
    """Before: "Unknown preset '/nowhere/dir'. Did you mean 'gcnn-en'…", a --weights path that
    is not there told only what weights may be, and a run directory given for a preset directory
    "has no config.json" with no word of its best/."""
    err = one_sentence_error(["train", "--preset", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")], capsys)
    assert f"The preset directory '{tmp_path / 'nowhere'}' does not exist." in err, err
    err = one_sentence_error(["train", "--preset", "gcnn-ptb", "--weights", str(tmp_path / "nowhere"),
                              "--out", str(tmp_path / "r")], capsys)
    assert f"got '{tmp_path / 'nowhere'}' (nothing is there)." in err, err
    run = tmp_path / "run"
    lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    lm.save_to_preset(str(run / "best"))
    err = one_sentence_error(["score", str(run), "the cat"], capsys)
    assert f"has no config.json: it looks like a run directory, whose models are {run / 'best'}." in err, err
    assert not (tmp_path / "r").exists()
