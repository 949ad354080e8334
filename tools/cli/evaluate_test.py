"""`zoo evaluate`: the perplexity of a trained run on a split or on a whole file, as training
logged it, and one-sentence errors. (The run: tools/cli/conftest.py's `trained`.)"""

import json
import os

import pytest

import zoo
from tests.cli_checks import one_sentence_error
from zoo.tools.cli import main


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
    assert lines[2] == f"valid words: {unknown_note(share)}"
    import zoo
    from zoo.data import read_lines

    bits = zoo.load(os.path.join(trained, "best")).perplexity(read_lines(corpus, "valid"), mode="stream")
    assert lines[3:] == [f"valid bits per byte (stream): {bits.bits_per_byte:.4f}; per character: "
                         f"{bits.bits_per_character:.4f}",
                         f"valid the costliest 1% of the words (stream): {bits.worst_words_share:.1%} of the total"]
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
        err = one_sentence_error(["evaluate", os.path.join(trained, "best"), *argv], capsys)
        for word in words:
            assert word in err, (word, err)


@pytest.mark.parametrize("argv, message", [
    (["evaluate", "{tmp}/nopreset"], "does not exist"),
    (["evaluate", "{tmp}/noconfig"], "has no config.json"),
])
def test_bad_input_gives_one_sentence_and_exit_code_2(argv, message, tmp_path, capsys):
    (tmp_path / "noconfig").mkdir()
    assert message in one_sentence_error([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)


def test_evaluate_quantize_int8_scores_the_quantized_model_and_an_unknown_mode_is_one_sentence(
        tiny_model, word_tokenizer, tiny_corpus, tmp_path, capsys):
    from zoo.data import read_lines

    preset = tiny_model("gcnn", tokenizer=word_tokenizer).save_to_preset(str(tmp_path / "tiny"))
    assert main(["evaluate", preset, "--data", tiny_corpus, "--split", "valid", "--quantize", "int8"]) == 0
    printed = float(capsys.readouterr().out.split("\n")[0].split(":")[-1])
    model = zoo.load(preset)
    float_ppl = float(model.perplexity(read_lines(tiny_corpus, "valid"), mode="stream"))
    model.quantize("int8")
    int8_ppl = float(model.perplexity(read_lines(tiny_corpus, "valid"), mode="stream"))
    assert printed == pytest.approx(int8_ppl, abs=0.005) and int8_ppl != float_ppl
    err = one_sentence_error(["evaluate", preset, "--data", tiny_corpus, "--quantize", "fp8"], capsys)
    assert "Unknown quantization mode 'fp8'; the zoo's models quantize to 'int8'" in err


def test_a_huge_perplexity_prints_in_four_significant_digits():
    from zoo.tools.cli.evaluate import _figure

    assert _figure(152.804) == "152.80" and _figure(999_999_999.0) == "999999999.00"
    assert _figure(3.97e59) == "3.97e+59"
