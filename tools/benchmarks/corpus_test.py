"""tools/benchmarks/corpus.py on a tiny raw corpus: `zoo benchmark input` tokenises raw text as
`zoo train` does, and `raw-text` times the word, subword and body models on it."""

import json

import pytest

from zoo.tools.benchmarks import corpus


@pytest.mark.ci
def test_input_benchmark_tokenises_raw_text_as_zoo_train_does(tmp_path):
    from zoo.training.tokenization_test import raw_corpus

    data = raw_corpus(tmp_path / "raw")
    result = corpus.input_main(
        ["--data", data, "--tokenizer", "subword", "--vocabulary-size", "320", "--rounds", "2", "--batches", "3",
         "--steps", "1", "--global-batch-size", "2", "--seq-len", "8", "--json", str(tmp_path / "r.json")])
    assert result["tokenizer"] == "subword" and result["vocabulary_size"] == 320
    assert len(result["pipeline_rounds"]) == len(result["step_rounds"]) == 2
    assert result["ratio"] == result["pipeline_tokens_per_s"] / result["step_tokens_per_s"]
    assert json.load(open(tmp_path / "r.json"))["ratio"] == result["ratio"]


@pytest.mark.ci
def test_raw_text_benchmark_times_word_subword_and_the_body_on_the_corpus(tmp_path, capsys):
    from zoo.training.data import load_corpus
    from zoo.training.tokenization_test import raw_corpus

    data = raw_corpus(tmp_path / "raw")
    report = corpus.raw_text(["--data", data, "--vocabulary-size", "320", "--small"])
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
