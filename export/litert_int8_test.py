"""A LiteRT int8 export (the converter's dynamic-range quantization) changes a trained preset's
per-word test perplexity by at most 1% (issue 54, item 3), each test sentence scored by the
flatbuffer's `prefill` in float32 and in int8, and its file is at most 30% of float32's (item 4; a
tied table stored once, `zoo.export.litert_tables`).

The treebank presets run in the ci tier; `gcnn-en` runs where its corpus has been built
(`python -m zoo.tools.corpora english DIR`, then `ZOO_ENGLISH_CORPUS=DIR`).
"""

import math
import os

import numpy as np
import pytest

import zoo
from zoo.data.corpus import read_lines, scored_words
from zoo.export import export_litert

CASES = [("gcnn-ptb", "ptb"), ("gcnn-ptb-deep", "ptb"), ("lstmp-ptb", "ptb"),
         ("gcnn-en", os.environ.get("ZOO_ENGLISH_CORPUS"))]


def per_word_perplexity(path, ids_list, words):
    from ai_edge_litert.interpreter import Interpreter

    prefill = Interpreter(model_path=os.path.join(path, "model.tflite")).get_signature_runner("prefill")
    total = sum(float(prefill(token_ids=np.asarray([ids], np.int32))["token_log_probs"].sum()) for ids in ids_list)
    return math.exp(-total / words)


@pytest.mark.ci
@pytest.mark.parametrize("preset, data", CASES, ids=[preset for preset, _ in CASES])
def test_int8_changes_the_test_perplexity_by_at_most_one_percent(preset, data, tmp_path):
    if data is None:
        pytest.skip("gcnn-en's corpus: set ZOO_ENGLISH_CORPUS to a directory built by zoo.tools.corpora english")
    lm = zoo.load(preset, weights="trained")
    lines = read_lines(data, "test")
    ids_list = [ids for ids in map(lm.tokenizer.encode, lines) if len(ids) >= 2]
    paths = {q: export_litert(lm, tmp_path / str(q), quantize=q) for q in (None, "int8")}
    perplexity = {q: per_word_perplexity(path, ids_list, scored_words(lines)) for q, path in paths.items()}
    change = perplexity["int8"] / perplexity[None] - 1
    size = os.path.getsize(os.path.join(paths["int8"], "model.tflite")) / os.path.getsize(
        os.path.join(paths[None], "model.tflite"))
    print(f"{preset}: per-word test perplexity float32 {perplexity[None]:.2f}, int8 {perplexity['int8']:.2f} "
          f"({change:+.3%}); int8 file {size:.1%} of float32's")
    assert abs(change) <= 0.01 and size <= 0.30
