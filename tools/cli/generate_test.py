"""`zoo generate`: prompts from the command line, a file or standard input, batched, each batch
seeded apart; bad input is one sentence. (The run: tools/cli/conftest.py's `trained`.)"""

import io
import os
import re

import pytest

import zoo
from tests.cli_checks import one_sentence_error
from zoo.tools.cli import main


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
    (["x", "--stop", " "], "A stop text must hold more than whitespace, got ' '"),
    (["x", "--temperature", "inf"], "temperature must be a finite number >= 0"),
])
def test_generate_refuses_bad_input_in_one_sentence(trained, argv, message, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    err = one_sentence_error(["generate", os.path.join(trained, "best"), *argv], capsys)
    assert re.search(message, err), err


def test_a_prompts_file_that_is_not_utf8_is_one_sentence(trained, tmp_path, capsys):
    path = tmp_path / "prompts.txt"
    path.write_bytes(b"the caf\xe9 said\n")  # Latin-1
    err = one_sentence_error(["generate", os.path.join(trained, "best"), "--file", str(path)], capsys)
    assert f"The prompts file {path} is not UTF-8: line 1, byte 8 is 0xe9" in err and "iconv" in err, err
