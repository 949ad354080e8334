"""`zoo convert fairseq`: the command line of `zoo.convert.fairseq` (whose conversions are tested
exactly against fairseq in zoo/convert/fairseq_test.py)."""

import os

import zoo
from zoo.tools.cli import main

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "zoo", "convert", "testdata")
DICT = os.path.join(TESTDATA, "dict.txt")


def test_the_command_line_converts_and_refuses_in_one_sentence(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "wikitext103_2018.legacy.pt"), "--dictionary", DICT,
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}: GCNN of 6 blocks, 64 ids, 2018 adaptive softmax\n"
    converted = zoo.load(str(out))
    assert converted.input_projection and converted.tokenizer.line_start == "</s>"
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "wikitext103.pt"), "--dictionary", DICT,
                 "--out", str(out)]) == 2
    assert "already holds a preset" in capsys.readouterr().err
    assert main(["convert", "fairseq", os.path.join(TESTDATA, "plain.pt"), "--dictionary", str(tmp_path / "no.txt"),
                 "--out", str(tmp_path / "other")]) == 2
    assert "The dictionary '" in capsys.readouterr().err and not (tmp_path / "other").exists()


def test_an_out_that_is_a_file_or_a_dictionary_that_is_not_utf8_is_one_sentence(tmp_path, capsys):
    from tests.cli_checks import one_sentence_error

    checkpoint = os.path.join(TESTDATA, "wikitext103.pt")
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    err = one_sentence_error(["convert", "fairseq", checkpoint, "--dictionary", DICT, "--out", str(taken)], capsys)
    assert f"{taken} is a file; give an --out that does not exist or is an empty directory." in err, err
    assert taken.read_text() == "mine"
    below = taken / "sub"  # before, a FileExistsError's traceback
    err = one_sentence_error(["convert", "fairseq", checkpoint, "--dictionary", DICT, "--out", str(below)], capsys)
    assert f"{taken} is a file; give an --out that does not exist or is an empty directory." in err, err
    assert taken.read_text() == "mine"
    latin = tmp_path / "dict.txt"
    latin.write_bytes(b"caf\xe9 12\n")
    out = tmp_path / "out"
    err = one_sentence_error(["convert", "fairseq", checkpoint, "--dictionary", str(latin), "--out", str(out)], capsys)
    assert f"The dictionary {latin} is not UTF-8: line 1, byte 4 is 0xe9" in err and "iconv" in err, err
    assert not out.exists()
