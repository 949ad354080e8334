"""`zoo score`: one line per text, its total beside each word's log-probability, and one-sentence
errors. (The run: tools/cli/conftest.py's `trained`.)"""

import os

import pytest

import zoo
from tests.cli_checks import one_sentence_error
from zoo.tools.cli import main


def test_each_text_prints_its_total_and_each_words_score_as_the_model_gives_them(trained, capsys):
    best = os.path.join(trained, "best")
    texts = ["the big cat sat on the mat", "the zebra sat"]
    assert main(["score", best, *texts]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    scores = zoo.load(best).score(texts)
    assert len(lines) == 2
    for line, text, want in zip(lines, texts, scores):
        total, pairs = line.split("\t")
        assert float(total) == pytest.approx(sum(want), abs=1e-4)
        assert [float(p.rsplit(":", 1)[1]) for p in pairs.split()] == pytest.approx(list(want), abs=1e-3)
    # a word vocabulary: one score per token, </s> last and <unk> where a word is unknown
    assert [p.rsplit(":", 1)[0] for p in lines[1].split("\t")[1].split()] == ["the", "<unk>", "sat", "</s>"]


@pytest.mark.parametrize("argv, message", [
    (["score", "{tmp}/noconfig", "x"], "has no config.json"),
    (["score", "{best}", "the cat", "  "], "Cannot score an empty text"),
])
def test_bad_input_gives_one_sentence_and_exit_code_2(argv, message, trained, tmp_path, capsys):
    (tmp_path / "noconfig").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{best}", os.path.join(trained, "best")) for a in argv]
    assert message in one_sentence_error(argv, capsys)


def test_an_empty_text_among_others_is_refused_before_any_is_printed(trained, capsys):
    assert main(["score", os.path.join(trained, "best"), "the cat", " ", "the mat"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Cannot score an empty text" in err
