"""Each signature of a word-model export (export/signatures.py), loaded in this process and called
against the in-process model (export/conftest.py's exports): bad text never raises and never gives
NaN, and generates what `lm.generate` does; `generate` refuses a bad setting naming it (and the
next request works) and its optional inputs have defaults in the SignatureDef; out-of-range ids
are refused with a message; the MoE's graph is the noiseless sparse inference path; a character
model's `generate` detokenises in the graph as `lm.generate` does."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo.export as export
from zoo.data.vocab import SPECIALS
from zoo.models import GCNNLanguageModel
from tests.export_checks import (FAMILIES, GENERATE_DEFAULTS, MAX_TOKENS, TEXTS, WORDS, assert_same,
                                 discourage_end_of_sentence, expected, signature_defaults)

# Every test here needs a whole export first (a session fixture): the capability tier.
pytestmark = pytest.mark.ci


# ---- bad input ------------------------------------------------------------------------------
LONG_LINE = " ".join(WORDS[i % len(WORDS)] for i in range(5000))
BAD = ["", "  \t \u3000 \n", LONG_LINE, b"\xff\xfe caf\xe9 the \xc3", "zebra quokka the axolotl",
       "the\u00a0cat\u2028sat\x1con\u2003the mat"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_bad_input_gives_defined_finite_outputs(family, exported, loaded):
    model, _ = exported[family]
    serve = loaded[family].signatures["serving_default"]
    batch = serve(text=tf.constant(BAD))  # a mixed batch of all of them
    want = expected(model, "serving_default", {"text": BAD})
    assert_same({k: v.numpy() for k, v in batch.items()}, want, f"{family} mixed batch")
    assert batch["lengths"].numpy().tolist() == [1, 1, MAX_TOKENS, 5, 5, 7]
    for i, text in enumerate(BAD):  # alone, each gives what it gives in the batch
        alone = serve(text=tf.constant([text]))
        n = int(alone["lengths"][0])
        np.testing.assert_allclose(alone["token_log_probs"].numpy()[0], want["token_log_probs"][i][:n], atol=1e-5)
    nxt = loaded[family].signatures["next_token"](text=tf.constant(BAD), k=tf.constant(4))
    assert np.all(np.isfinite(nxt["log_probs"].numpy())) and nxt["ids"].numpy().min() >= 2
    assert_same({k: v.numpy() for k, v in nxt.items()}, expected(model, "next_token", {"text": BAD, "k": [4]}),
                f"{family} next_token")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_bad_text_generates_as_lm_generate_does(family, exported, loaded):
    model, _ = exported[family]
    texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in BAD]
    settings = {"max_new_tokens": 6, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 1}
    got = loaded[family].signatures["generate"](text=tf.constant(BAD), **{k: tf.constant(v) for k, v in settings.items()})
    want = expected(model, "generate", {"text": texts, **settings})
    # the long line: the export keeps its last MAX_TOKENS words (after <s>), in-process reads it all
    prompt = model.tokenizer.encode(texts[2], add_eos=False)
    cut = model.generate(prompt[:1] + prompt[1:][-MAX_TOKENS:], max_new_tokens=6, temperature=0, jit_compile=False)
    want["ids"][2] = cut[-6:]
    want["text"][2] = model.tokenizer.decode(cut)
    assert_same({k: v.numpy() for k, v in got.items()}, want, f"{family} generate on bad text")


# ---- generate's settings ----------------------------------------------------------------------
GENERATE_ERRORS = [
    ({"max_new_tokens": -1}, r"max_new_tokens must be in \[1, 256\]"),
    ({"max_new_tokens": 0}, r"max_new_tokens must be in \[1, 256\]"),
    ({"max_new_tokens": 257}, r"max_new_tokens must be in \[1, 256\]"),
    ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ({"top_k": -2}, r"top_k must be in \[0, 50\]"),
    ({"top_k": 51}, r"top_k must be in \[0, 50\]"),
    ({"temperature": -0.5}, r"temperature must be >= 0"),
    ({"num_beams": 0}, r"num_beams must be in \[1, 16\] \(1: no beam search\)"),
    ({"num_beams": 17}, r"num_beams must be in \[1, 16\] \(1: no beam search\)"),
]


@pytest.mark.parametrize("bad, message", GENERATE_ERRORS)
def test_generate_refuses_a_bad_setting_naming_it_and_the_next_request_works(bad, message, exported, loaded):
    generate = loaded["gcnn"].signatures["generate"]
    settings = {**GENERATE_DEFAULTS, "temperature": 0.0, "max_new_tokens": 4, **bad}
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        generate(text=tf.constant(["the cat"]), **{k: tf.constant(v) for k, v in settings.items()})
    good = {**GENERATE_DEFAULTS, "temperature": 0.0, "max_new_tokens": 4}
    r = generate(text=tf.constant(["the cat"]), **{k: tf.constant(v) for k, v in good.items()})
    assert_same({k: v.numpy() for k, v in r.items()},
                expected(exported["gcnn"][0], "generate", {"text": ["the cat"], **good}), "after a refused request")


@pytest.mark.parametrize("family", ["gcnn", "lstm"])
def test_served_beams_equal_lm_generates(family, exported, loaded):
    generate = loaded[family].signatures["generate"]
    texts = ["the cat", "a dog sat on", ""]
    for beams in (2, 4):
        settings = {**GENERATE_DEFAULTS, "max_new_tokens": 5, "num_beams": beams, "temperature": 0.7, "seed": 3}
        got = generate(text=tf.constant(texts), **{k: tf.constant(v) for k, v in settings.items()})
        want = expected(exported[family][0], "generate", {"text": texts, **settings})
        assert_same({k: v.numpy() for k, v in got.items()}, want, f"{family} generate, {beams} beams")


def test_generate_optional_inputs_have_defaults_in_the_signature_def(exported):
    for _, path in exported.values():
        assert signature_defaults(path, "generate") == pytest.approx(GENERATE_DEFAULTS)
        assert signature_defaults(path, "serving_default") == {}
    metadata = json.load(open(os.path.join(exported["gcnn"][1], "assets.extra", "zoo_export.json")))
    assert metadata["signatures"]["generate"]["defaults"] == GENERATE_DEFAULTS
    assert metadata["max_new_tokens"] == 256


def test_out_of_range_ids_are_refused_with_a_message(loaded):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"token_ids must be in \[0, 49\]"):
        loaded["lstm"].signatures["score_ids"](token_ids=tf.constant([[1, 50, 2]]), lengths=tf.constant([3]))


# ---- an empty batch, and shapes that disagree -----------------------------------------------------
EMPTY_SHAPES = {  # the rows and dtypes of each output for a request of no rows
    "serving_default": {"token_log_probs": tf.float32, "lengths": tf.int32, "log_prob": tf.float32,
                        "perplexity": tf.float32},
    "next_token": {"words": tf.string, "ids": tf.int32, "log_probs": tf.float32},
    "generate": {"text": tf.string, "completion": tf.string, "ids": tf.int32, "lengths": tf.int32},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_empty_batch_gets_an_answer_of_no_rows_and_the_next_request_works(family, exported, loaded):
    """TensorFlow's CPU convolution gives a wrongly shaped result for an empty batch: before the
    signatures kept one stand-in row, `text=[]` failed inside the model with a shape error."""
    model, _ = exported[family]
    sigs = loaded[family].signatures
    empty = tf.constant([], tf.string)
    settings = {**GENERATE_DEFAULTS, "max_new_tokens": 4}
    calls = {
        "serving_default": lambda: sigs["serving_default"](text=empty),
        "score_ids": lambda: sigs["score_ids"](token_ids=tf.zeros([0, 0], tf.int32), lengths=tf.zeros([0], tf.int32)),
        "next_token": lambda: sigs["next_token"](text=empty, k=tf.constant(3)),
        "generate": lambda: sigs["generate"](text=empty, **{k: tf.constant(v) for k, v in settings.items()}),
        "generate, 3 beams": lambda: sigs["generate"](
            text=empty, **{k: tf.constant(v) for k, v in {**settings, "num_beams": 3}.items()}),
    }
    for name, call in calls.items():
        out = call()
        want = EMPTY_SHAPES[name.split(",")[0] if not name.startswith("score_ids") else "serving_default"]
        assert {k: v.dtype for k, v in out.items()} == want, name
        assert all(v.shape[0] == 0 for v in out.values()), (name, {k: v.shape for k, v in out.items()})
    specs = {k: v for k, v in sigs["decode_step"].structured_input_signature[1].items() if k != "token_ids"}
    out = sigs["decode_step"](token_ids=tf.zeros([0], tf.int32),
                              **{k: tf.zeros([0] + v.shape[1:], tf.float32) for k, v in specs.items()})
    assert out["log_probs"].shape == (0, model.vocabulary_size)
    # and the same signatures answer a real request as before
    got = sigs["serving_default"](text=tf.constant(TEXTS))
    assert_same({k: v.numpy() for k, v in got.items()}, expected(model, "serving_default", {"text": TEXTS}),
                f"{family} after an empty batch")


SHAPE_ERRORS = [
    ({"token_ids": [[3, 4, 5], [3, 4, 0]], "lengths": [3, 4]}, r"lengths must be in \[0, the width of token_ids\]"),
    ({"token_ids": [[3, 4, 5], [3, 4, 0]], "lengths": [3, -1]}, r"lengths must be in \[0, the width of token_ids\]"),
    ({"token_ids": [[3, 4, 5], [3, 4, 0]], "lengths": [3]}, r"lengths must have one value per row of token_ids"),
    ({"token_ids": [[3, 4, 5]], "lengths": [3, 2]}, r"lengths must have one value per row of token_ids"),
]


@pytest.mark.parametrize("given, message", SHAPE_ERRORS)
def test_score_ids_refuses_lengths_that_do_not_fit_token_ids(given, message, loaded):
    """Before, a length past the width was clipped to it in silence, and one too few or too many
    failed deep in the graph."""
    score_ids = loaded["gcnn"].signatures["score_ids"]
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        score_ids(**{k: tf.constant(v, tf.int32) for k, v in given.items()})
    assert score_ids(token_ids=tf.constant([[1, 3, 4]]), lengths=tf.constant([3]))["lengths"].numpy().tolist() == [2]


@pytest.mark.parametrize("family", ["gcnn", "lstm"])
def test_decode_step_refuses_a_state_with_another_batch_size(family, loaded):
    decode = loaded[family].signatures["decode_step"]
    specs = {k: v for k, v in decode.structured_input_signature[1].items() if k != "token_ids"}
    name = sorted(specs)[0]
    state = {k: tf.zeros([2] + v.shape[1:], tf.float32) for k, v in specs.items()}
    state[name] = tf.zeros([3] + specs[name].shape[1:], tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"decode_step: {name} must have one row per token id"):
        decode(token_ids=tf.constant([3, 4]), **state)


# ---- the MoE runs its inference path with sparse dispatch --------------------------------------
def _graph_ops(path):
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    return ops


def test_moe_export_is_the_noiseless_sparse_inference_path_without_metric_updates(exported, loaded):
    ops = _graph_ops(exported["moe"][1])
    assert {"UnsortedSegmentSum", "SplitV", "TopKV2"} <= ops  # sparse dispatch: per-expert slices
    assert not {op for op in ops if "Random" in op}  # no gate noise
    assert "AssignAddVariableOp" not in ops  # the MoE's balance metrics are not updated
    serve = loaded["moe"].signatures["serving_default"]
    first, second = serve(text=tf.constant(TEXTS)), serve(text=tf.constant(TEXTS))
    np.testing.assert_array_equal(first["token_log_probs"].numpy(), second["token_log_probs"].numpy())
    moe = exported["moe"][0].stack[1]
    # the test's tokens really reach different experts
    x = tf.random.stateless_normal((40, 16), seed=(1, 2))
    assert np.count_nonzero(moe.gates(x).numpy().sum(axis=0)) >= 5


@pytest.mark.ci
def test_a_character_model_generates_through_the_export_as_in_process(tmp_path):
    """A character vocabulary (U+2581 for a space) detokenised in the graph: the signature's text
    is what `lm.generate` returns, greedy and seeded, with odd characters in the prompts."""
    from zoo.data.vocab import CharTokenizer

    chars = list("abcdefghijklmnopqrstuvwxyz") + ["\u2581", "é", "中"]
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=len(SPECIALS) + len(chars), embedding_dim=8, blocks=[[[3, 16]]])
    model.tokenizer = CharTokenizer(list(SPECIALS) + chars)
    discourage_end_of_sentence(model)
    path = export.export_saved_model(model, str(tmp_path), "chars")
    generate = tf.saved_model.load(path).signatures["generate"]
    prompts = ["the cat", "", "café 中文 x"]
    for settings in ({"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0},
                     {"temperature": 0.9, "top_k": 10, "top_p": 0.9, "seed": 5}):
        got = generate(text=tf.constant(prompts), max_new_tokens=tf.constant(12), num_beams=tf.constant(1),
                       **{k: tf.constant(v) for k, v in settings.items()})
        kw = {"temperature": 0} if settings["temperature"] == 0 else \
            {"temperature": settings["temperature"], "top_k": settings["top_k"], "top_p": settings["top_p"]}
        want = model.generate(prompts, max_new_tokens=12, seed=settings["seed"], jit_compile=False, **kw)
        assert [t.decode() for t in got["text"].numpy()] == want
        assert all("\u2581" not in text for text in want) and want[2].startswith("café 中")  # spaces as spaces
