"""`zoo benchmark score` on a tiny preset directory: both ways score alike, and the table."""

import pytest

from zoo.tools.benchmarks import score


def test_both_ways_give_the_same_scores_and_the_table_their_medians(tmp_path, tiny_model, tiny_lines, monkeypatch):
    from tests.model_checks import vocab_model
    from zoo.models import inference

    model, lines = vocab_model(tiny_model, tiny_lines)
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n\n   \n")
    calls, real = [], inference.score_batches

    def recorded(lengths, rows=None, tokens=None):
        calls.append(inference.SCORE_BATCH_ROWS)
        return real(lengths, rows, tokens)

    monkeypatch.setattr(inference, "score_batches", recorded)
    result = score.measure(model, score.read_texts([str(tmp_path / "*.txt")]), 2)
    assert sorted(set(calls)) == [1, inference.SCORE_BATCH_ROWS]  # one way in batches of one row
    assert inference.SCORE_BATCH_ROWS == 64  # restored
    assert len(result["batched"]) == len(result["one_per_call"]) == 2
    assert result["max_difference"] < 1e-5
    row = {"preset": "p", "texts": 100, "one_per_call": [2.0, 4.0, 9.0], "batched": [0.5, 1.0, 0.1],
           "max_difference": 3e-7}
    assert score.table([row]).splitlines()[2] == "| `p` | 100 | 4.00 (25) | 0.50 (200) | 8.00× | 3.0e-07 |"


def test_no_text_and_bad_repeats_are_one_sentence(tmp_path):
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match=r"^No text to score in .*blank\.txt: give --text files"):
        score.read_texts([str(tmp_path / "blank.txt")])
    with pytest.raises(ValueError, match=r"^--text .*nowhere\.txt names no file; give text files, or glob patterns"):
        score.read_texts([str(tmp_path / "blank.txt"), str(tmp_path / "nowhere.txt")])
    with pytest.raises(ValueError, match=r"^--repeats must be at least 1, got 0\.$"):
        score.main(["--repeats", "0"])
