"""`zoo benchmark raw-text` on a tiny raw corpus."""

import pytest


@pytest.mark.ci
def test_raw_text_benchmark_times_word_subword_and_the_body_on_the_corpus(tmp_path, capsys):
    from zoo.tools.benchmarks import raw_text
    from zoo.training.data import load_corpus
    from zoo.training.tokenization_test import raw_corpus

    data = raw_corpus(tmp_path / "raw")
    report = raw_text.main(["--data", data, "--vocabulary-size", "320", "--small"])
    assert set(report) == {"word", "subword", "body"}
    assert report["body"]["ids"] == 300 and report["subword"]["ids"] == 320
    _, _, words = load_corpus(data, None, "word", 1, None, "word", None, log=lambda m: None)
    assert report["word"]["ids"] == len(words) and report["word"]["tokens_per_word"] == 1.0
    assert report["subword"]["tokens_per_word"] > 1.0 == report["word"]["tokens_per_word"]
    assert report["body"]["tokens_per_word"] == report["subword"]["tokens_per_word"]
    for r in report.values():
        assert r["words_per_second"] == 4 * 16 / r["seconds_per_step"] / r["tokens_per_word"]
    assert report["word"]["words_per_second_vs_word"] == 1.0
    assert "command: zoo benchmark raw-text" in capsys.readouterr().out
