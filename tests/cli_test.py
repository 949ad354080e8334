"""The `zoo` command line end to end on a tiny generated corpus, and its errors."""

import json
import os

import numpy as np
import pytest

import zoo
from zoo.tools.cli import main, parser
from zoo.tools.cli.train import train_config

WORDS = "the cat dog sat on mat a big small red".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny corpus with structure a model can learn: 'the <adj> <noun> sat on the mat'."""
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 300), ("valid", 30), ("test", 30)):
        lines = [f"the {rng.choice(['big', 'small', 'red'])} {rng.choice(['cat', 'dog'])} sat on the mat"
                 for _ in range(n)]
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(root)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("run"))
    code = main(["train", "--preset", "gcnn-ptb", "--data", corpus, "--out", out, "--epochs", "3", "--tokenizer", "word",
                 "--batch-size", "8", "--seq-len", "16", "--set", "dropout=0.0",
                 "--set", 'blocks=[[[3, 16]], [[3, 16]]]', "--set", "embedding_dim=16"])
    assert code == 0
    return out


def test_train_writes_history_best_preset_and_logs(trained, capsys):
    history = json.load(open(os.path.join(trained, "history.json")))
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["val_perplexity"] < history[0]["val_perplexity"]
    assert os.path.isdir(os.path.join(trained, "logs"))
    best = min(history, key=lambda h: h["val_perplexity"])
    model = zoo.load(os.path.join(trained, "best"))
    assert model.vocabulary is not None and len(model.vocabulary) == model.vocabulary_size
    assert best["best"] is True


@pytest.mark.ci
def test_evaluate_matches_history_and_score_generate_print(trained, corpus, capsys):
    history = json.load(open(os.path.join(trained, "history.json")))
    best = min(h["val_perplexity"] for h in history)
    assert main(["evaluate", os.path.join(trained, "best"), "--data", corpus, "--split", "valid",
                 "--mode", "stream"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    per_token, per_word = lines[:2]
    from zoo.data.corpus import unknown_note

    # a closed word vocabulary: the share of <unk> words, as training logged it, on a line of its own
    share = min(history, key=lambda h: h["val_perplexity"])["val_unknown_share"]
    assert lines[2:] == [f"valid words: {unknown_note(share)}"]
    assert per_token.startswith("valid perplexity (stream): ")
    assert per_word.startswith("valid perplexity per word (stream): ")
    assert float(per_token.split(":")[-1]) == pytest.approx(best, abs=0.005)  # printed with 2 decimals
    # a word vocabulary scores exactly the words and one </s> per line: the same figure
    assert float(per_word.split(":")[-1]) == float(per_token.split(":")[-1])
    history_per_word = min(history, key=lambda h: h["val_perplexity"])["val_perplexity_per_word"]
    assert history_per_word == pytest.approx(best, rel=1e-9)

    assert main(["score", os.path.join(trained, "best"), "the big cat sat on the mat"]) == 0
    line = capsys.readouterr().out.strip()
    total, pairs = line.split("\t")
    assert len(pairs.split()) == 8  # 7 words + </s>
    assert float(total) == pytest.approx(sum(float(p.rsplit(":", 1)[1]) for p in pairs.split()), abs=0.01)

    assert main(["generate", os.path.join(trained, "best"), "the big", "--temperature", "0",
                 "--max-new-tokens", "6"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.split()[:2] == ["the", "big"]
    assert printed == zoo.load(os.path.join(trained, "best")).generate("the big", max_new_tokens=6, temperature=0)


@pytest.mark.ci
def test_generate_batches_prompts_from_the_command_line_and_a_file(trained, tmp_path, capsys):
    best = os.path.join(trained, "best")
    model = zoo.load(best)
    prompts = ["the big", "", "a red dog sat on the", "the small cat"]
    want = model.generate(prompts, max_new_tokens=5, temperature=0)
    assert main(["generate", best, *prompts, "--temperature", "0", "--max-new-tokens", "5", "--batch-size", "3"]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == want
    path = tmp_path / "prompts.txt"
    path.write_bytes("\n".join(prompts).encode() + b"\n")
    assert main(["generate", best, "--file", str(path), "--sampler", "greedy", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == want
    assert main(["generate", best, *prompts, "--temperature", "0", "--max-length", "5"]) == 0  # the deprecated name
    printed = capsys.readouterr()
    assert printed.out.split("\n")[:-1] == want and "--max-length is deprecated, use --max-new-tokens" in printed.err
    # sampled, seeded: each batch of --batch-size draws with seed + its first prompt's index
    assert main(["generate", best, *prompts, "--top-k", "3", "--seed", "7", "--max-new-tokens", "5",
                 "--batch-size", "2"]) == 0
    sampled = model.generate(prompts[:2], max_new_tokens=5, top_k=3, seed=7) + \
        model.generate(prompts[2:], max_new_tokens=5, top_k=3, seed=9)
    assert capsys.readouterr().out.split("\n")[:-1] == sampled
    assert main(["generate", best, "the big", "--sampler", "beam", "--num-beams", "3", "--stop", "mat",
                 "--no-repeat-ngram-size", "2", "--max-new-tokens", "8"]) == 0
    assert capsys.readouterr().out.strip() == model.generate("the big", max_new_tokens=8, sampler="beam", num_beams=3,
                                                             stop=["mat"], no_repeat_ngram_size=2)


@pytest.mark.parametrize("argv, message", [
    ([], "No prompt: give one or more prompts, or --file"),
    (["x", "--file", "f"], "on the command line or with --file, not both"),
    (["--file", "/nonexistent/prompts.txt"], "Cannot read the prompts file '/nonexistent/prompts.txt'"),
    (["x", "--sampler", "nucleus"], "Unknown sampler 'nucleus'"),
    (["x", "--max-new-tokens", "0"], r"max_new_tokens must be an integer in \[1, 1048576\], got 0"),
    (["x", "--max-new-tokens", "3", "--max-length", "3"], r"as --max-new-tokens \(--max-length is its deprecated name\), not both"),
    (["x", "--top-k", "100000"], r"top_k must be in \[1, \d+\] \(the vocabulary size\)"),
    (["x", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["--file", "-"], "No prompt: standard input is empty"),
])
def test_generate_refuses_bad_input_in_one_sentence(trained, argv, message, capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["generate", os.path.join(trained, "best"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("zoo: error: ") and len(err.splitlines()) == 1
    import re
    assert re.search(message, err), err


# `zoo presets --params` of the release before counts were read off the layers' own shapes (they
# were a hand-written mirror of the layers then); docs/presets.md's tables print these.
PARAMETER_COUNTS = {
    "gcnn-13": 458_502_544, "gcnn-14b": 418_745_939, "gcnn-9": 170_008_871, "gcnn-8b": 182_492_931,
    "gcnn-8": 131_782_893, "gcnn-14": 223_498_623, "gcnn-ptb": 3_096_850, "lstm-ptb": 6_181_650,
    "rnn-char": 313_920, "moe-4": 433_585_419, "moe-32": 463_017_227, "moe-256": 698_471_691,
    "moe-256-h": 698_488_075, "moe-1024-h": 1_505_760_523, "moe-4096-h": 4_734_850_315,
    "moe-34m": 5_167_555_331, "moe-143m": 5_223_940_867, "moe-1-wide": 433_579_787,
    "moe-1-deep": 433_579_787, "4xlstm-512": 433_579_275, "lstm-2048-512": 434_627_851,
    "lstm-moe-ptb": 10_408_722, "lstm-wide-ptb": 6_707_218, "gcnn-moe-ptb": 4_161_810,
    "lstmp-ptb": 3_162_386, "gcnn-en": 8_390_866,
}


@pytest.mark.ci
def test_presets_params_prints_every_preset_with_its_unchanged_count(capsys):
    assert main(["presets", "--params"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert [l.split()[0] for l in lines] == list(zoo.presets())
    counts = {l.split()[0]: int(l.split()[1].replace(",", "")) for l in lines}
    assert {name: counts[name] for name in PARAMETER_COUNTS} == PARAMETER_COUNTS
    assert counts["gcnn-ptb"] == zoo.load("gcnn-ptb").count_params()


def test_evaluate_scores_a_whole_file_with_split_all_and_names_a_missing_part(trained, tmp_path, capsys):
    lines = ["the red cat sat on the mat", "the big dog sat on the mat", "  ", "the small cat sat on the mat"]
    path = tmp_path / "mine.txt"
    path.write_text("\n".join(lines) + "\n")
    # --split all: every usable line of one file, not its 20th held out as "test"
    assert main(["evaluate", os.path.join(trained, "best"), "--data", str(path), "--split", "all",
                 "--mode", "sentence"]) == 0
    printed = capsys.readouterr().out.strip().split("\n")
    model = zoo.load(os.path.join(trained, "best"))
    expected = model.perplexity([l for l in lines if l.strip()], mode="sentence")
    assert printed[0].startswith("all perplexity (sentence): ")
    assert float(printed[0].split(":")[-1]) == pytest.approx(float(expected), abs=0.005)
    (tmp_path / "one.txt").write_text("the red cat\n")
    (tmp_path / "blank.txt").write_text("\n \n")
    for argv, words in [
        # the default split, test, of a file too short to hold one: one sentence saying so and what to do
        (["--data", str(path)], ["has 3 usable lines, too few for a test part", "11th, 31st, 51st", "--split all"]),
        (["--data", str(tmp_path / "one.txt"), "--split", "train"], ["has 1 usable line, too few for a train part"]),
        (["--data", str(tmp_path / "blank.txt"), "--split", "all"], ["blank.txt is empty"]),
        (["--split", "all"], ["--split all scores one whole text file, and --data 'ptb' is not one"]),
        (["--split", "bogus"], ["Unknown split 'bogus'", "or all (every line"]),
        (["--data", str(tmp_path), "--split", "all"], ["is not one; give a file, or a split"]),
    ]:
        assert main(["evaluate", os.path.join(trained, "best"), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("zoo: error: ") and len(err.strip().split("\n")) == 1, err
        for word in words:
            assert word in err, (word, err)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--preset", "gcnn-15", "--data", "ptb", "--out", "{tmp}/x"], "Unknown preset 'gcnn-15'"),
        (["train", "--preset", "gcnn-ptb", "--data", "{tmp}/nowhere", "--out", "{tmp}/x"], "does not exist"),
        (["train", "--preset", "gcnn-ptb", "--data", "{tmp}/empty.txt", "--out", "{tmp}/x"], "is empty"),
        (["train", "--preset", "gcnn-ptb", "--data", "ptb", "--out", "{tmp}/x",
          "--set", "blocks=[[[0, 8]]]"], "kernel_size must be an integer >= 1, got 0"),
        (["evaluate", "{tmp}/nopreset"], "does not exist"),
        (["evaluate", "{tmp}/noconfig"], "has no config.json"),
        (["score", "{tmp}/noconfig", "x"], "has no config.json"),
    ],
)
def test_bad_input_gives_one_sentence_and_exit_code_2(argv, message, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "noconfig").mkdir()
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("zoo: error: ") and message in err
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1


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
