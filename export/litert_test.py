"""The LiteRT export (`zoo.export.litert`), run through `ai_edge_litert`'s interpreter: in float32
its `prefill` and `decode` signatures give the Keras model's log-probabilities to 1e-4 (every
family: a GCNN with an adaptive softmax, a tied GCNN, an LSTM, an LSTMP and an LSTM–MoE–LSTM
stack), greedy decoding through it writes `lm.generate`'s ids, its `sample` signature draws with the
library's `candidates` on the given noise, the file uses LiteRT's built-in ops only; int8 is a
quarter of the bytes and close, a tied table stored once; bad input is refused in one sentence and
an existing path is never changed; `lm.export(format=...)`. `zoo export --format litert`:
tools/cli/export_test.py."""

import json
import os

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from tests.export_checks import (discourage_end_of_sentence, tiny_gcnn, tiny_lstm, tiny_moe, tiny_tied_gcnn,
                                 vocabulary)
from zoo.data.base_tokenizer import saved_tokenizer_class
from zoo.data.vocab import SPECIALS, WordTokenizer
from zoo.export import ExportError, export_litert, litert, litert_tables
from zoo.export.state import StateLayout
from zoo.models import generation

FAMILIES = {
    "gcnn": tiny_gcnn,  # an adaptive softmax (cutoffs 10, 30), weight-normalised convolutions
    "tied_gcnn": tiny_tied_gcnn,
    "lstm": tiny_lstm,
    "lstmp": lambda tiny_model: tiny_model("lstmp"),
    "moe": tiny_moe,  # its gates route tokens apart: the dispatch's sizes vary per token
}
IDS = [1, 4, 6, 8, 9, 5, 7, 3, 12, 30, 45, 2, 4]  # <s> the cat sat on a dog <unk> … </s> the
TOLERANCE = 1e-4  # float32, absolute, on log-probabilities (issue 54, item 3)


@pytest.fixture(scope="module")
def exports(tiny_model, tmp_path_factory):
    """{family: (model, export directory, interpreter)}, each exported once in float32."""
    base = tmp_path_factory.mktemp("litert")
    out = {}
    for family, make in FAMILIES.items():
        model = make(tiny_model)
        model.tokenizer = vocabulary()
        discourage_end_of_sentence(model)
        path = export_litert(model, base / family)
        out[family] = (model, path, Interpreter(model_path=os.path.join(path, litert.MODEL_FILE)))
    return out


def _reference(model, ids):
    """The Keras model's log-distribution at every position of `ids`, [time, vocabulary]."""
    return np.asarray(model.log_probs(np.array([ids])))[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_prefill_gives_the_keras_models_log_probabilities(exports, family):
    model, _, interpreter = exports[family]
    full = _reference(model, IDS)
    out = interpreter.get_signature_runner("prefill")(token_ids=np.array([IDS], np.int32))
    expected = full[np.arange(len(IDS) - 1), IDS[1:]]
    assert out["token_log_probs"].shape == (1, len(IDS) - 1)
    np.testing.assert_allclose(out["token_log_probs"][0], expected, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(out["log_probs"][0], full[-1], atol=TOLERANCE, rtol=0)
    # the same as what `score` answers
    np.testing.assert_allclose(out["token_log_probs"][0], model.score([IDS])[0], atol=TOLERANCE, rtol=0)
    # a prompt of <s> alone scores nothing and gives the first distribution
    alone = interpreter.get_signature_runner("prefill")(token_ids=np.array([[1]], np.int32))
    assert alone["token_log_probs"].shape == (1, 0)
    np.testing.assert_allclose(alone["log_probs"][0], full[0], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_steps_give_each_positions_log_probabilities_and_prefills_state(exports, family):
    model, _, interpreter = exports[family]
    full = _reference(model, IDS)
    decode = interpreter.get_signature_runner("decode")
    layout = litert.FlatState(model)
    state = np.zeros([1, layout.size], np.float32)
    keras_state = model.initial_state(1)
    for t, token in enumerate(IDS):
        out = decode(token_ids=np.array([token], np.int32), state=state)
        np.testing.assert_allclose(out["log_probs"][0], full[t], atol=TOLERANCE, rtol=0, err_msg=f"step {t}")
        state = out["state"]
        _, keras_state = model.step(np.array([token], np.int32), keras_state)
        np.testing.assert_allclose(state, layout.pack(keras_state).numpy(), atol=1e-5, rtol=0)
    prefilled = interpreter.get_signature_runner("prefill")(token_ids=np.array([IDS], np.int32))["state"]
    np.testing.assert_allclose(prefilled, state, atol=1e-5, rtol=0)


def greedy_through(interpreter, model, prompt, max_new_tokens, stop=True):
    """Greedy decoding through the export's signatures, `lm.generate`'s rules: never `<pad>` or
    `<s>`, a row ends after `</s>` (`stop`)."""
    never = generation.never_emitted(model)
    out = interpreter.get_signature_runner("prefill")(token_ids=np.array([prompt], np.int32))
    decode = interpreter.get_signature_runner("decode")
    ids = list(prompt)
    for _ in range(max_new_tokens):
        scores = out["log_probs"][0].copy()
        scores[never] = -np.inf
        token = int(np.argmax(scores))
        ids.append(token)
        if stop and token == model.tokenizer.eos_id:
            break
        out = decode(token_ids=np.array([token], np.int32), state=out["state"])
    return ids


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_through_the_file_writes_generates_ids(exports, family):
    model, _, interpreter = exports[family]
    for prompt in ([1], [1, 4, 6, 8]):
        expected = model.generate([prompt], max_new_tokens=20, temperature=0)[0]
        assert greedy_through(interpreter, model, prompt, 20) == expected
        assert len(expected) == len(prompt) + 20  # </s> discouraged: every step compared


def greedy_call(interpreter, fed, state, steps):
    """One `greedy` call: `(the new ids, the state)`, the ids after the count asked for checked 0."""
    token_ids = np.zeros([1, litert.GREEDY_STEPS], np.int32)
    token_ids[0, :len(fed)] = fed
    out = interpreter.get_signature_runner("greedy")(token_ids=token_ids, count=np.array([len(fed)], np.int32),
                                                     state=state, steps=np.array([steps], np.int32))
    assert not out["token_ids"][0, steps:].any()
    return out["token_ids"][0, :steps].tolist(), out["state"]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_greedy_signature_loops_in_the_file_as_decode_steps_do(exports, family):
    """`greedy` calls (a prompt fed whole from the zero state and 3 tokens, then the last id fed
    and the most a call makes, then 1: the loop inside the file) write `lm.generate`'s greedy ids
    and hand back the state `prefill` gives for every id but the last, which the next call feeds;
    a prompt's last id fed after `prefill`'s state of the others writes the same ids."""
    model, _, interpreter = exports[family]
    prompt, zero = [1, 4, 6, 8], np.zeros([1, litert.FlatState(model).size], np.float32)
    made, state = greedy_call(interpreter, prompt, zero, 3)
    for steps in (litert.GREEDY_STEPS, 1):
        more, state = greedy_call(interpreter, made[-1:], state, steps)
        made += more
    assert prompt + made == model.generate([prompt], max_new_tokens=len(made), temperature=0)[0]
    prefill = interpreter.get_signature_runner("prefill")
    np.testing.assert_allclose(state, prefill(token_ids=np.array([prompt + made[:-1]], np.int32))["state"],
                               atol=1e-5, rtol=0)
    after = prefill(token_ids=np.array([prompt[:-1]], np.int32))["state"]
    assert greedy_call(interpreter, prompt[-1:], after, 3)[0] == made[:3]


def test_a_subword_model_exports_its_sentencepiece_files_and_decodes_as_generate(tiny_model, tmp_path):
    """A SentencePiece tokenizer's files beside the flatbuffer read back as the model's tokenizer;
    greedy decoding never writes its `<unk>` (as `lm.generate`)."""
    from zoo.data import SubwordTokenizer

    lines = [f"the cat {i} sat on the mat with a dog" for i in range(60)] + ["naïve café 中文 end."] * 5
    tokenizer = SubwordTokenizer.train(lines, 296)
    model = tiny_model("gcnn", blocks=[[[3, 16]]], cutoffs=[100], tokenizer=tokenizer)
    path = export_litert(model, tmp_path / "subword")
    assert saved_tokenizer_class(path).load(path).encode("the cat sat") == tokenizer.encode("the cat sat")
    about = json.load(open(os.path.join(path, litert.METADATA_FILE)))
    assert about["tokenizer"] == tokenizer.kind and set(about["tokenizer_files"]) <= set(os.listdir(path))
    interpreter = Interpreter(model_path=os.path.join(path, litert.MODEL_FILE))
    prompt = [tokenizer.bos_id] + tokenizer.encode("the cat")
    assert tokenizer.unk_id in generation.never_emitted(model)
    assert greedy_through(interpreter, model, prompt, 12, stop=False) == \
        model.generate([prompt], max_new_tokens=12, temperature=0, stop=None)[0]


SAMPLE_SETTINGS = [(1.0, None, None), (0.7, None, None), (1.0, 5, None), (0.8, 40, None), (1.0, None, 0.9),
                   (0.6, 8, 0.5), (2.0, 1, None), (1.0, None, 1e-6)]


def test_the_sample_signature_draws_with_the_librarys_candidates_on_the_given_noise(exports):
    """`sample` is `zoo.models.samplers.candidates` and a Gumbel-max draw on the noise, as
    TensorFlow computes them (`litert.sample`): same noise, same token; top-k 1 or a tiny top-p is
    the most likely id; no draw ever leaves the top k or the top-p nucleus; a vocabulary-sized
    `top_k` and `top_p` 1 are none."""
    import tensorflow as tf

    from zoo.models.samplers import candidates

    model, _, interpreter = exports["gcnn"]
    v = model.vocabulary_size
    sample = interpreter.get_signature_runner("sample")
    log_probs = _reference(model, IDS)[3:4]
    rng = np.random.default_rng(0)
    for temperature, top_k, top_p in SAMPLE_SETTINGS:
        inputs = {"temperature": np.array([temperature], np.float32), "top_k": np.array([top_k or v], np.int32),
                  "top_p": np.array([top_p or 1.0], np.float32)}
        values, ids = candidates(tf.constant(log_probs), temperature, top_k, top_p)
        allowed = set(np.asarray(ids)[0][np.isfinite(np.asarray(values)[0])].tolist())
        drawn = []
        for _ in range(30):
            noise = ((np.floor(rng.random([1, v]) * 2**23) + 0.5) / 2**23).astype(np.float32)
            token = int(sample(log_probs=log_probs, noise=noise, **inputs)["token_ids"][0])
            assert token == int(litert.sample(v, tf.constant(log_probs), tf.constant(noise),
                                              *(tf.constant(x) for x in inputs.values()))[0])
            assert token == int(sample(log_probs=log_probs, noise=noise, **inputs)["token_ids"][0])
            drawn.append(token)
        assert set(drawn) <= allowed, (temperature, top_k, top_p)
        if top_k == 1 or top_p == 1e-6:
            assert set(drawn) == {int(np.argmax(log_probs))}
        elif top_k is None and top_p is None:
            assert len(set(drawn)) > 5  # the whole distribution of an untrained model


@pytest.mark.ci  # three conversions of fairseq checkpoints (7 s or more each)
@pytest.mark.parametrize("case", ["gbw", "wikitext103_2018", "plain"])
def test_converted_fairseq_models_give_fairseqs_log_probabilities_and_greedy_tokens(case, tmp_path):
    """zoo/convert's fairseq checkpoints (reduced width; both adaptive-softmax formats, and a
    plain fconv_lm with its output projection) against fairseq's own outputs."""
    from zoo.convert import fairseq
    from zoo.convert.fairseq_test import DICT, TESTDATA, zoo_ids

    golden = np.load(os.path.join(TESTDATA, f"{case}.npz"))
    model = fairseq.convert(os.path.join(TESTDATA, case + ".pt"), DICT, tmp_path / "preset")
    interpreter = Interpreter(model_path=os.path.join(export_litert(model, tmp_path / "litert"), litert.MODEL_FILE))
    prefill = interpreter.get_signature_runner("prefill")
    for tokens, expected in zip(zoo_ids(golden["tokens"]), golden["log_probs"]):
        out = prefill(token_ids=tokens[None].astype(np.int32))
        np.testing.assert_allclose(out["token_log_probs"][0], expected, atol=TOLERANCE, rtol=0)
    for prompt, greedy in zip(zoo_ids(golden["prompt"]), zoo_ids(golden["greedy"])):
        ids = greedy_through(interpreter, model, prompt.tolist(), len(greedy), stop=False)
        assert ids[len(prompt):] == greedy.tolist()


@pytest.mark.parametrize("family", FAMILIES)
def test_only_litert_builtin_ops_and_the_json_says_what_is_inside(exports, family):
    model, path, interpreter = exports[family]
    about = json.load(open(os.path.join(path, litert.METADATA_FILE)))
    tokenizer_files = set(os.listdir(path)) - {litert.MODEL_FILE, litert.METADATA_FILE}
    assert "vocabulary.txt" in tokenizer_files <= set(model.tokenizer.files) and litert.MODEL_FILE in os.listdir(path)
    assert about["tokenizer_files"] == list(model.tokenizer.files)
    assert not [op for op in about["ops"] if op.startswith("CUSTOM")], about["ops"]
    # the interpreter's own list (without XNNPACK, which replaces the ops it takes by DELEGATE)
    plain = Interpreter(model_path=os.path.join(path, litert.MODEL_FILE),
                        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert {op["op_name"] for op in plain._get_ops_details()} <= set(about["ops"])
    assert "FLEX" not in " ".join(about["ops"]).upper()
    # the tokenizer's files read back as the model's tokenizer
    assert saved_tokenizer_class(path).load(path) == model.tokenizer
    v, size = model.vocabulary_size, about["state"]["size"]
    assert about["family"] == type(model).__name__ and about["vocabulary_size"] == v
    assert about["quantization"] is None and about["zoo_version"]
    assert about["signatures"] == {
        "prefill": {"inputs": {"token_ids": {"shape": [1, -1], "dtype": "int32"}},
                    "outputs": {"token_log_probs": {"shape": [1, -1], "dtype": "float32"},
                                "log_probs": {"shape": [1, v], "dtype": "float32"},
                                "state": {"shape": [1, size], "dtype": "float32"}}},
        "decode": {"inputs": {"token_ids": {"shape": [1], "dtype": "int32"},
                              "state": {"shape": [1, size], "dtype": "float32"}},
                   "outputs": {"log_probs": {"shape": [1, v], "dtype": "float32"},
                               "state": {"shape": [1, size], "dtype": "float32"}}},
        "sample": {"inputs": {"log_probs": {"shape": [1, v], "dtype": "float32"},
                              "noise": {"shape": [1, v], "dtype": "float32"},
                              "temperature": {"shape": [1], "dtype": "float32"},
                              "top_k": {"shape": [1], "dtype": "int32"},
                              "top_p": {"shape": [1], "dtype": "float32"}},
                   "outputs": {"token_ids": {"shape": [1], "dtype": "int32"}}},
        "greedy": {"inputs": {"token_ids": {"shape": [1, litert.GREEDY_STEPS], "dtype": "int32"},
                              "count": {"shape": [1], "dtype": "int32"},
                              "state": {"shape": [1, size], "dtype": "float32"},
                              "steps": {"shape": [1], "dtype": "int32"}},
                   "outputs": {"token_ids": {"shape": [1, litert.GREEDY_STEPS], "dtype": "int32"},
                               "state": {"shape": [1, size], "dtype": "float32"}}},
    }
    assert about["never_emitted"] == generation.never_emitted(model)
    # the layout: the SavedModel's decode_step tensors, end to end
    specs = StateLayout(model).specs
    layout = about["state"]["layout"]
    assert [part["name"] for part in layout] == list(specs)
    assert [tuple(part["shape"]) for part in layout] == list(specs.values())
    assert [part["offset"] for part in layout] == list(np.cumsum([0] + [p["size"] for p in layout[:-1]]))
    assert sum(part["size"] for part in layout) == size
    runners = interpreter.get_signature_list()
    assert set(runners) == set(litert.SIGNATURES) == {"prefill", "decode", "sample", "greedy"}


@pytest.fixture(scope="module")
def weighty(tmp_path_factory):
    """A GCNN whose weights dominate the file (vocabulary 2,000, width 128), exported in float32
    and in int8: (model, float32 directory, int8 directory)."""
    import keras

    from zoo import models

    keras.utils.set_random_seed(1)
    tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(2000 - len(SPECIALS))])
    model = models.GCNNLanguageModel(vocabulary_size=len(tokenizer), embedding_dim=128,
                                     blocks=[[[3, 128]], [[3, 128]]])
    model.tokenizer = tokenizer
    base = tmp_path_factory.mktemp("weighty")
    return model, export_litert(model, base / "float32"), export_litert(model, base / "int8", quantize="int8")


@pytest.mark.ci  # a weightier model's two conversions (12 s); litert_int8_test.py measures the presets
def test_int8_is_under_30_percent_of_float32_with_per_channel_weights_and_close(weighty):
    model, float_path, int8_path = weighty
    sizes = [os.path.getsize(os.path.join(p, litert.MODEL_FILE)) for p in (float_path, int8_path)]
    assert sizes[1] <= 0.30 * sizes[0], sizes
    # the 2 GiB check's estimate (stored weights, each once) is the float32 file's size
    assert abs(4 * litert.stored_weights(model) - sizes[0]) < 0.03 * sizes[0], (litert.stored_weights(model), sizes)
    about = json.load(open(os.path.join(int8_path, litert.METADATA_FILE)))
    assert about["quantization"]["mode"] == "int8" and not [op for op in about["ops"] if op.startswith("CUSTOM")]
    # per channel: the output layer's [2000, 128] matrix is int8 with one scale per output row
    from tensorflow.lite.tools import flatbuffer_utils

    flat = flatbuffer_utils.read_model(os.path.join(int8_path, litert.MODEL_FILE))
    int8_tensors = {(tuple(int(d) for d in t.shape), len(t.quantization.scale)) for g in flat.subgraphs
                    for t in g.tensors if t.type == 9 and t.quantization is not None  # 9: INT8
                    and t.quantization.scale is not None}
    assert ((2000, 128), 2000) in int8_tensors, int8_tensors
    ids = np.array([[1, 4, 6, 8, 9, 5, 7, 3, 12, 30]], np.int32)
    full = np.asarray(model.log_probs(ids))[0]
    interpreter = Interpreter(model_path=os.path.join(int8_path, litert.MODEL_FILE))
    out = interpreter.get_signature_runner("prefill")(token_ids=ids)
    # int8 weights, activations quantized on the fly: within 0.01 nats of float32 (measured 3e-4), not 0
    difference = np.abs(out["token_log_probs"][0] - full[np.arange(9), ids[0, 1:]]).max()
    print(f"int8/float32 bytes {sizes[1] / sizes[0]:.3f}, max |difference| {difference:.4f}")
    assert 0 < difference < 0.01, difference
    decode = interpreter.get_signature_runner("decode")
    state = np.zeros([1, about["state"]["size"]], np.float32)
    for t in range(ids.shape[1]):
        step = decode(token_ids=ids[:, t], state=state)
        state = step["state"]
        assert np.abs(step["log_probs"][0] - full[t]).max() < 0.01


def _int8_tables(flatbuffer, shape):
    """How many int8 tables of `shape` the flatbuffer stores (buffers with data; the signatures'
    subgraphs share them)."""
    from tensorflow.lite.tools import flatbuffer_utils

    flat = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    return len({t.buffer for g in flat.subgraphs for t in g.tensors if t.type == 9  # 9: INT8
                and tuple(int(d) for d in t.shape) == shape and flat.buffers[t.buffer].data is not None})


@pytest.fixture(scope="module")
def tied():
    """A tied GCNN (vocabulary 2,000, width 64): (its float32 flatbuffer, its int8 flatbuffer as the
    converter writes it, the same with its table shared)."""
    import keras

    from zoo import models

    keras.utils.set_random_seed(2)
    model = models.GCNNLanguageModel(vocabulary_size=2000, embedding_dim=64, blocks=[[[3, 64]]], tie_embeddings=True)
    model.tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(2000 - len(SPECIALS))])
    from unittest import mock

    with mock.patch.object(litert, "share_tied_table", lambda flatbuffer: flatbuffer):
        return litert.convert(model), litert.convert(model, "int8")


def _tied_rows_and_weights(flatbuffer, ids):
    """The rows `prefill`'s EMBEDDING_LOOKUP read for `ids`, and the output layer's int8 weights
    dequantized with their scale per row."""
    from tensorflow.lite.tools import flatbuffer_utils

    interpreter = Interpreter(model_content=flatbuffer, experimental_preserve_all_tensors=True,
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.get_signature_runner("prefill")(token_ids=ids)
    rows = [interpreter.get_tensor(t["index"], g) for g in range(interpreter.num_subgraphs())
            for t in interpreter.get_tensor_details(g) if t["name"] == "zoo/tied_rows"]
    flat = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    weights = next(t for g in flat.subgraphs for t in g.tensors if t.type == 9 and t.quantization is not None
                   and t.quantization.scale is not None and len(t.quantization.scale) == 2000)
    q = flat.buffers[weights.buffer].data.view(np.int8).reshape(2000, 64).astype(np.float32)
    return rows, q * np.asarray(weights.quantization.scale, np.float32)[:, None]


def test_a_tied_table_is_stored_once_in_int8_and_read_with_its_scale_per_row(tied):
    float32, converted = tied
    shared = litert_tables.share_tied_table(converted)
    assert _int8_tables(converted, (2000, 64)) == 2 and _int8_tables(shared, (2000, 64)) == 1
    assert len(converted) - len(shared) > 0.99 * 2000 * 64  # the copy, less the few ops and tensors added
    contents = litert.flatbuffer_contents(shared)
    assert "EMBEDDING_LOOKUP" in contents["ops"] and set(contents["signatures"]) == {"prefill", "decode", "sample"}
    ids = np.array([[1, 4, 1999, 8, 9, 5, 7, 3, 12, 30]], np.int32)
    rows, weights = _tied_rows_and_weights(shared, ids)
    assert len(rows) == 1
    np.testing.assert_array_equal(rows[0], weights[ids[0]])  # the output layer's own int8 rows and scales
    # the outputs stay as close to float32 as the converter's (its gather had one scale for the table)
    runs = [Interpreter(model_content=f).get_signature_runner("prefill")(token_ids=ids)
            for f in (float32, converted, shared)]
    errors = [np.abs(run["token_log_probs"] - runs[0]["token_log_probs"]).max() for run in runs[1:]]
    print(f"max |int8 - float32| log-probability: converter's {errors[0]:.2e}, shared {errors[1]:.2e}")
    assert max(errors) < 0.01


@pytest.mark.ci  # two int8 conversions (11 s)
def test_an_int8_file_goes_without_greedy_where_its_loop_would_pass_the_int8_share(small, monkeypatch):
    """The greedy loop's subgraphs carry their own copies of the per-row scales: an int8 file that
    would pass INT8_SHARE of float32's is made again without `greedy` (zoo_litert then decodes a
    token a call)."""
    signatures = lambda: set(litert.flatbuffer_contents(litert.convert(small, "int8"))["signatures"])  # noqa: E731
    monkeypatch.setattr(litert, "INT8_SHARE", 1.0)
    assert signatures() == {"prefill", "decode", "sample", "greedy"}
    monkeypatch.setattr(litert, "INT8_SHARE", 0.01)
    assert signatures() == {"prefill", "decode", "sample"}


@pytest.mark.ci  # the weightier model's conversions
def test_without_a_tied_table_the_flatbuffer_is_unchanged(weighty):
    _, _, int8_path = weighty
    flatbuffer = open(os.path.join(int8_path, litert.MODEL_FILE), "rb").read()
    assert litert_tables.share_tied_table(flatbuffer) == flatbuffer


# ---- bad input -------------------------------------------------------------------------------------
def _snapshot(path):
    if os.path.isfile(path):
        return open(path, "rb").read(), os.stat(path).st_mtime_ns
    return {name: _snapshot(os.path.join(path, name)) for name in sorted(os.listdir(path))}, os.stat(path).st_mtime_ns


@pytest.fixture
def small(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 8]]])
    model.tokenizer = vocabulary()
    return model


def _one_sentence(message):
    assert "\n" not in message and message.endswith(".") and message.count(". ") == 0, message
    return message


def test_an_existing_path_is_never_changed(small, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    afile = tmp_path / "model.tflite"
    afile.write_bytes(b"not a model")
    for path in (taken, afile):
        before = _snapshot(path)
        with pytest.raises(ExportError, match="already exists and is never changed") as e:
            export_litert(small, path)
        _one_sentence(str(e.value))
        assert _snapshot(path) == before
    assert sorted(os.listdir(tmp_path)) == ["model.tflite", "taken"]  # no temporary directory left


@pytest.mark.parametrize("quantize", ["int4", "float16", "INT8", ""])
def test_an_unknown_quantize_is_refused_in_one_sentence(small, tmp_path, quantize):
    with pytest.raises(ExportError, match=f"Unknown quantize {quantize!r}") as e:
        export_litert(small, tmp_path / "out", quantize=quantize)
    _one_sentence(str(e.value))
    assert not os.path.exists(tmp_path / "out")


def test_a_flatbuffer_past_2_gib_is_refused_before_converting_suggesting_int8(small, tmp_path, monkeypatch):
    monkeypatch.setattr(litert, "FLATBUFFER_LIMIT", 4 * litert.stored_weights(small))  # at 4 bytes a weight
    monkeypatch.setattr(litert, "convert", lambda *a, **k: pytest.fail("converted"))
    with pytest.raises(ExportError, match="past LiteRT's .* limit: export it with quantize='int8'") as e:
        export_litert(small, tmp_path / "out")
    _one_sentence(str(e.value).replace("GiB, past", "GiB past"))
    with pytest.raises(ExportError, match="even at a byte a weight"):
        monkeypatch.setattr(litert, "FLATBUFFER_LIMIT", litert.stored_weights(small))
        export_litert(small, tmp_path / "out", quantize="int8")
    assert not os.path.exists(tmp_path / "out")


def test_a_model_quantized_in_memory_or_without_tokenizer_is_refused(small, tiny_model, tmp_path):
    bare = tiny_model("gcnn", blocks=[[[3, 8]]])
    with pytest.raises(ExportError, match="has no tokenizer"):
        export_litert(bare, tmp_path / "out")
    small.quantize("int8")
    with pytest.raises(ExportError, match=r"already int8 \(model.quantize\).*quantize='int8' instead"):
        export_litert(small, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out")


def test_a_failed_conversion_is_one_sentence_and_leaves_nothing(small, tmp_path, monkeypatch):
    def fails(*args, **kwargs):
        raise RuntimeError("'tf.SomeOp' op is neither a custom op nor a flex op\n  %0 = ... pages of MLIR")

    monkeypatch.setattr(litert, "convert", fails)
    with pytest.raises(ExportError, match="could not convert GCNNLanguageModel with LiteRT's built-in ops: "
                                          "'tf.SomeOp' op is neither a custom op nor a flex op") as e:
        export_litert(small, tmp_path / "deep" / "out")
    assert "\n" not in str(e.value)
    assert os.listdir(tmp_path / "deep") == []


# ---- Keras' spelling -------------------------------------------------------------------------------
def test_keras_export_spelling_litert_and_refusals(small, tmp_path):
    path = small.export(str(tmp_path / "lite"), format="litert")
    assert path == str(tmp_path / "lite") and litert.MODEL_FILE in os.listdir(path)
    for fmt in ("onnx", "openvino", "torch", "saved_model"):
        with pytest.raises(ValueError, match=f"format='tf_saved_model' .* or 'litert' .*; got '{fmt}'") as e:
            small.export(str(tmp_path / fmt), format=fmt)
        _one_sentence(str(e.value).replace("(one .tflite file)", "(one tflite file)"))
        assert not os.path.exists(tmp_path / fmt)
    with pytest.raises(ValueError, match="leave input_signature unset"):
        small.export(str(tmp_path / "sig"), format="litert", input_signature=[None])


@pytest.mark.ci  # a whole SavedModel export
def test_keras_export_spelling_tf_saved_model_writes_the_next_version(small, tmp_path):
    version = small.export(str(tmp_path / "serving" / "tiny"), max_new_tokens=4, batch_sizes=[1])
    assert version == str(tmp_path / "serving" / "tiny" / "1")  # TF Serving's layout, the next version
    assert {"saved_model.pb", "assets.extra"} <= set(os.listdir(version))
    assert small.export(str(tmp_path / "serving" / "tiny"), format="tf_saved_model", max_new_tokens=4,
                        batch_sizes=[1]).endswith(os.path.join("tiny", "2"))
