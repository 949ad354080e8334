"""`zoo benchmark input-pipeline` on a tiny raw corpus."""

import pytest

import json


@pytest.mark.ci
def test_input_benchmark_tokenises_raw_text_as_zoo_train_does(tmp_path):
    from zoo.tools.benchmarks import input_pipeline
    from zoo.training.tokenization_test import raw_corpus

    data = raw_corpus(tmp_path / "raw")
    result = input_pipeline.main(
        ["--data", data, "--tokenizer", "subword", "--vocabulary-size", "320", "--rounds", "2", "--batches", "3",
         "--steps", "1", "--global-batch-size", "2", "--seq-len", "8", "--json", str(tmp_path / "r.json")])
    assert result["tokenizer"] == "subword" and result["vocabulary_size"] == 320
    assert len(result["pipeline_rounds"]) == len(result["step_rounds"]) == 2
    assert result["ratio"] == result["pipeline_tokens_per_s"] / result["step_tokens_per_s"]
    assert json.load(open(tmp_path / "r.json"))["ratio"] == result["ratio"]

