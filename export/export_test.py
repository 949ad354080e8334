"""SavedModel export for TF Serving: a GCNN with an adaptive softmax, an LSTM baseline and an
LSTM–MoE–LSTM stack, exported once (module fixture) and checked against the in-process models.

- a fresh Python process that imports only TensorFlow (the repository not even importable)
  loads every export, calls every signature and streams greedy generation through
  `decode_step`; its results equal `score` / `log_probs` / `decode_step` / `generate` here;
- `saved_model_cli show --all` lists the four signatures with their names and dtypes;
- the TF Serving request bodies of docs/serving.md, mapped to signature calls the way TF
  Serving's REST API maps them, give that page's answers and the in-process model's numbers;
- bad text never raises and never gives NaN;
- versions: next version, never overwritten, failed exports leave nothing behind.
"""

import base64
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo.export as export
import zoo.export.saved_model  # noqa: F401  (export.saved_model, patched below)
from zoo.export.state import StateLayout
from zoo.data.vocab import SPECIALS, Vocabulary
from zoo.models import GCNNLanguageModel
from zoo.models.stack import StackLanguageModel

# Every test here needs a whole export first (a module fixture): the capability tier.
pytestmark = pytest.mark.ci

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 46 words, so that the vocabulary has 50 ids; the examples of docs/serving.md use them.
WORDS = ("the a cat dog sat on mat big small red ran to house is was and of in it he she saw "
         "bird tree green blue old new man woman child ate fish bread with under over by at "
         "home park car road fast slow sun").split()
MAX_TOKENS = export.DEFAULT_MAX_TOKENS
SIGNATURES = ("serving_default", "score_ids", "next_token", "decode_step", "generate")
GENERATE_DEFAULTS = {"max_new_tokens": 20, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0}
SCORES = {"token_log_probs": "DT_FLOAT", "lengths": "DT_INT32", "log_prob": "DT_FLOAT", "perplexity": "DT_FLOAT"}


def vocabulary():
    return Vocabulary(list(SPECIALS) + WORDS)


def _discourage_end_of_sentence(model):
    """</s> (id 2, in the head) 6 nats less likely: greedy decoding of these untrained models then
    runs for its whole length instead of stopping at once."""
    bias = model.head.head_bias if hasattr(model.head, "head_bias") else model.head.bias
    value = bias.numpy()
    value[2] -= 6.0
    bias.assign(value)


def tiny_gcnn():
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]],
                              cutoffs=[10, 30])
    return model


def tiny_tied_gcnn():
    """A GCNN whose full softmax is its embedding, transposed (tie_embeddings), with embedding dropout."""
    keras.utils.set_random_seed(0)
    return GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]], [[2, 8]]], tie_embeddings=True,
                             embedding_dropout=0.2, dropout=0.1)


def tiny_lstm():
    keras.utils.set_random_seed(0)
    return StackLanguageModel(vocabulary_size=50, embedding_dim=8, layers=[{"type": "lstm", "units": 8}] * 2,
                              residual=False)


def tiny_moe():
    keras.utils.set_random_seed(0)
    layers = [{"type": "lstm", "units": 24, "projection": 16},
              {"type": "moe", "num_experts": 8, "k": 2, "hidden_units": 8, "groups": 2},
              {"type": "lstm", "units": 16}]
    model = StackLanguageModel(vocabulary_size=50, embedding_dim=16, layers=layers)
    # The gates start at zero (every token to the first experts): random ones route tokens apart.
    moe = model.stack[1]
    rng = np.random.default_rng(0)
    moe.gate_kernel.assign(rng.standard_normal(moe.gate_kernel.shape).astype("float32"))
    moe.secondary_gate_kernel.assign(rng.standard_normal(moe.secondary_gate_kernel.shape).astype("float32"))
    return model


FAMILIES = {"gcnn": tiny_gcnn, "gcnn-tied": tiny_tied_gcnn, "lstm": tiny_lstm, "moe": tiny_moe}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{family: (model, export path)}; the models exported once, to `base/<family>/1`."""
    base = str(tmp_path_factory.mktemp("exports"))
    out = {}
    for family, make in FAMILIES.items():
        model = make()
        model.vocabulary = vocabulary()
        _discourage_end_of_sentence(model)
        path = export.export_saved_model(model, base, family)
        assert path == os.path.join(base, family, "1")
        out[family] = (model, path)
    return out


@pytest.fixture(scope="module")
def loaded(exported):
    return {family: tf.saved_model.load(path) for family, (_, path) in exported.items()}


# ---- what the in-process model says -------------------------------------------------------
def _pad(rows, value, dtype):
    width = max([len(r) for r in rows] + [0])
    out = np.full((len(rows), width), value, dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _scores(rows):
    total = np.array([np.sum(r, dtype=np.float64) for r in rows])
    lengths = np.array([len(r) for r in rows], np.int32)
    return {"token_log_probs": _pad(rows, 0.0, np.float32), "lengths": lengths, "log_prob": total,
            "perplexity": np.exp(-total / np.maximum(lengths, 1))}


def expected(model, signature, inputs):
    """The in-process model's answer to a signature call (numpy inputs by name)."""
    vocab = model.vocabulary
    if signature == "serving_default":
        rows = []
        for text in inputs["text"]:
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
            scores = model.score([text])[0]
            if len(scores) - 1 > MAX_TOKENS:  # a cut line: its first MAX_TOKENS words, no </s>
                scores = scores[:MAX_TOKENS]
            rows.append(scores)
        return _scores(rows)
    if signature == "score_ids":
        ids, lengths = np.asarray(inputs["token_ids"]), np.asarray(inputs["lengths"]).reshape(-1)
        return _scores([model.score([ids[i, : lengths[i]]])[0] for i in range(len(ids))])
    if signature == "next_token":
        texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in inputs["text"]]
        k = np.broadcast_to(np.asarray(inputs["k"]).reshape(-1), (len(texts),))
        top = max(int(min(max(v, 0), 48)) for v in k) if len(k) else 0
        words, ids, log_probs = [], [], []
        for text, kk in zip(texts, k):
            prefix = vocab.encode(text, add_eos=False)
            prefix = prefix[:1] + prefix[1:][-MAX_TOKENS:]
            lp = model.log_probs([prefix])[0, -1].astype("float64")
            lp[:2] = -np.inf
            order = [int(i) for i in np.argsort(-lp, kind="stable")[: min(max(int(kk), 0), 48)]]
            pad = top - len(order)
            ids.append(order + [-1] * pad)
            words.append([vocab.tokens[i] for i in order] + [""] * pad)
            log_probs.append([lp[i] for i in order] + [0.0] * pad)
        return {"ids": np.array(ids, np.int32).reshape(len(texts), top),
                "words": np.array(words, object).reshape(len(texts), top),
                "log_probs": np.array(log_probs, np.float32).reshape(len(texts), top)}
    if signature == "generate":
        settings = {**GENERATE_DEFAULTS, **{k: np.asarray(v).item() for k, v in inputs.items() if k != "text"}}
        # the SavedModel runs the graph loop: the in-process one with the same draws is jit_compile=False
        kw = {"max_new_tokens": int(settings["max_new_tokens"]), "seed": int(settings["seed"]), "jit_compile": False}
        if settings["temperature"] == 0:
            kw["temperature"] = 0
        else:
            kw["temperature"] = float(settings["temperature"])
            kw.update({"top_k": int(settings["top_k"])} if settings["top_k"] else {})
            kw.update({"top_p": float(settings["top_p"])} if settings["top_p"] < 1 else {})
        texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in inputs["text"]]
        prompts = [vocab.encode(t, add_eos=False) for t in texts]
        rows = model.generate(prompts, **kw) if prompts else []
        new = [row[len(prompt):] for row, prompt in zip(rows, prompts)]
        return {"text": np.array([vocab.decode(r) for r in rows], object),
                "completion": np.array([vocab.decode(r) for r in new], object),
                "ids": _pad(new, 0, np.int32), "lengths": np.array([len(r) for r in new], np.int32)}
    if signature == "decode_step":
        layout = StateLayout(model)
        ids = np.asarray(inputs["token_ids"]).reshape(-1)
        state = layout.unflatten({n: tf.constant(np.asarray(inputs[n], np.float32)) for n in layout.specs}, len(ids))
        log_probs, state = model.decode_step(ids, state)
        out = {"log_probs": np.asarray(log_probs)}
        out.update({n: np.asarray(v) for n, v in layout.flatten(state).items()})
        return out
    raise AssertionError(signature)


def assert_same(got, want, what):
    """Token log-probs, log-probs and states to 1e-5; sums and perplexities to a relative 1e-5;
    ids, lengths and words exactly."""
    assert set(got) == set(want), what
    for name, value in want.items():
        g = np.asarray(got[name])
        assert g.shape == np.shape(value), f"{what}: {name} has shape {g.shape}, expected {np.shape(value)}"
        if name in ("lengths", "ids"):
            np.testing.assert_array_equal(g, value, err_msg=f"{what}: {name}")
        elif name == "words":
            assert [[w.decode() if isinstance(w, bytes) else w for w in row] for row in g.tolist()] == \
                np.asarray(value).tolist(), f"{what}: {name}"
        elif name in ("text", "completion"):
            assert [w.decode() if isinstance(w, bytes) else w for w in g.tolist()] == list(value), f"{what}: {name}"
        elif name in ("log_prob", "perplexity"):
            np.testing.assert_allclose(g, value, rtol=1e-5, atol=1e-5, err_msg=f"{what}: {name}")
        else:
            np.testing.assert_allclose(g, value, rtol=0, atol=1e-5, err_msg=f"{what}: {name}")
        assert np.all(np.isfinite(g.astype("float64"))) if g.dtype.kind in "fi" else True, f"{what}: {name}"


# ---- 1 and 4: a fresh process with TensorFlow only ------------------------------------------
FRESH_PROCESS = r'''
import json, sys
import numpy as np
import tensorflow as tf

plan = json.load(open(sys.argv[1]))
out = {}
for family, p in plan.items():
    sigs = tf.saved_model.load(p["path"]).signatures
    assert sorted(sigs) == ["decode_step", "generate", "next_token", "score_ids", "serving_default"], sorted(sigs)
    for tag, settings in p["generate"].items():
        r = sigs["generate"](text=tf.constant(p["prompts"]), **{k: tf.constant(v) for k, v in settings.items()})
        for key, value in r.items():
            out[f"{family}/generate_{tag}/{key}"] = value.numpy()
    for name, r in [
        ("serving_default", sigs["serving_default"](text=tf.constant(p["texts"]))),
        ("score_ids", sigs["score_ids"](token_ids=tf.constant(p["ids"], tf.int32),
                                        lengths=tf.constant(p["lengths"], tf.int32))),
        ("next_token", sigs["next_token"](text=tf.constant(p["prefixes"]), k=tf.constant(p["k"], tf.int32))),
    ]:
        for key, value in r.items():
            out[f"{family}/{name}/{key}"] = value.numpy()
    decode = sigs["decode_step"]
    specs = decode.structured_input_signature[1]
    names = sorted(n for n in specs if n != "token_ids")
    out[f"{family}/state_names"] = np.array(names)

    def zeros(batch):
        return {n: tf.zeros([batch] + specs[n].shape.as_list()[1:]) for n in names}

    state, steps = zeros(len(p["decode_ids"][0])), []
    for ids in p["decode_ids"]:
        r = decode(token_ids=tf.constant(ids, tf.int32), **state)
        steps.append(r["log_probs"].numpy())
        state = {n: r[n] for n in names}
    out[f"{family}/decode_step/log_probs"] = np.stack(steps, axis=1)
    for n in names:
        out[f"{family}/decode_step/{n}"] = state[n].numpy()
    # greedy generation, streamed: the state goes back and forth, one token per request
    state = zeros(1)
    for token in p["prompt"]:
        r = decode(token_ids=tf.constant([token], tf.int32), **state)
        state = {n: r[n] for n in names}
    tokens = []
    for _ in range(p["max_length"]):
        lp = r["log_probs"].numpy()[0].astype("float64")
        lp[p["never"]] = -np.inf
        token = int(np.argmax(lp))
        tokens.append(token)
        if token == p["eos"]:
            break
        r = decode(token_ids=tf.constant([token], tf.int32), **state)
        state = {n: r[n] for n in names}
    out[f"{family}/stream"] = np.array(tokens)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("zoo", "layers", "export"))
out["project_modules"] = np.array(loaded, dtype=object)
np.savez(sys.argv[2], **{k: (v.astype(str) if v.dtype == object else v) for k, v in out.items()})
print("ok", len(out))
'''

TEXTS = ["the cat sat on the mat", "a big dog", "", "the zebra ate   fish\tat home"]
IDS = [[1, 4, 6, 7, 2, 0], [1, 9, 20, 3, 11, 2], [1, 33, 2, 0, 0, 0]]
LENGTHS = [5, 6, 3]
PREFIXES = ["the cat", "", "a dog ran to the"]
K = [3, 5, 1]
DECODE_IDS = np.random.default_rng(3).integers(0, 50, size=(3, 7)).T.tolist()  # 7 steps of 3 sequences
PROMPT = "the big cat"
STREAM_LENGTH = 50
PROMPTS = ["the big cat", "", "a dog ran to the old house and the"]  # mixed lengths, an empty one
GENERATE = {"greedy": {"max_new_tokens": 12, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0},
            "top_k": {"max_new_tokens": 9, "temperature": 0.8, "top_k": 5, "top_p": 1.0, "seed": 3},
            "top_p": {"max_new_tokens": 9, "temperature": 1.2, "top_k": 0, "top_p": 0.7, "seed": 4}}


@pytest.fixture(scope="module")
def fresh_process(exported, tmp_path_factory):
    work = tmp_path_factory.mktemp("fresh")
    plan = {family: {"path": path, "texts": TEXTS, "ids": IDS, "lengths": LENGTHS, "prefixes": PREFIXES,
                     "k": K, "decode_ids": DECODE_IDS, "max_length": STREAM_LENGTH, "never": [0, 1], "eos": 2,
                     "prompt": model.vocabulary.encode(PROMPT, add_eos=False), "prompts": PROMPTS,
                     "generate": GENERATE}
            for family, (model, path) in exported.items()}
    (work / "plan.json").write_text(json.dumps(plan))
    (work / "fresh.py").write_text(FRESH_PROCESS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the repository is not importable
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "fresh.py", "plan.json", "out.npz"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(work / "out.npz"))


@pytest.mark.ci
def test_fresh_process_imports_only_tensorflow(fresh_process):
    assert list(fresh_process["project_modules"]) == []


@pytest.mark.ci
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_signature_in_a_fresh_process_equals_the_in_process_model(family, exported, fresh_process):
    model, _ = exported[family]
    inputs = {
        "serving_default": {"text": TEXTS},
        "score_ids": {"token_ids": IDS, "lengths": LENGTHS},
        "next_token": {"text": PREFIXES, "k": K},
    }
    for signature, given in inputs.items():
        got = {key.split("/")[2]: v for key, v in fresh_process.items() if key.startswith(f"{family}/{signature}/")}
        assert_same(got, expected(model, signature, given), f"{family} {signature}")
    # the unknown word "zebra" is <unk>, and tabs and repeated spaces separate words as str.split()
    assert fresh_process[f"{family}/serving_default/lengths"].tolist() == [7, 4, 1, 7]

    layout = StateLayout(model)
    assert fresh_process[f"{family}/state_names"].tolist() == sorted(layout.specs)
    state, steps = None, []
    for ids in DECODE_IDS:
        log_probs, state = model.decode_step(ids, state)
        steps.append(np.asarray(log_probs))
    np.testing.assert_allclose(fresh_process[f"{family}/decode_step/log_probs"], np.stack(steps, axis=1), atol=1e-5)
    for name, value in layout.flatten(state).items():
        np.testing.assert_allclose(fresh_process[f"{family}/decode_step/{name}"], np.asarray(value), atol=1e-5)


@pytest.mark.ci
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generate_signature_in_a_fresh_process_equals_lm_generate(family, exported, fresh_process):
    model, _ = exported[family]
    for tag, settings in GENERATE.items():
        got = {key.split("/")[2]: v for key, v in fresh_process.items() if key.startswith(f"{family}/generate_{tag}/")}
        assert_same(got, expected(model, "generate", {"text": PROMPTS, **settings}), f"{family} generate {tag}")
    # </s> is discouraged: greedy rows run their whole length, a sampled one may end early
    assert fresh_process[f"{family}/generate_greedy/lengths"].tolist() == [12, 12, 12]
    texts = [t.decode() if isinstance(t, bytes) else t for t in fresh_process[f"{family}/generate_greedy/text"]]
    assert texts[0].startswith("the big cat ") and texts[2].startswith("a dog ran to the old house and the ")


@pytest.mark.ci
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_streaming_decode_step_gives_greedy_generate(family, exported, fresh_process):
    model, _ = exported[family]
    prompt = model.vocabulary.encode(PROMPT, add_eos=False)
    generated = model.generate(prompt, max_new_tokens=STREAM_LENGTH, temperature=0)[len(prompt):]
    assert len(generated) == STREAM_LENGTH  # </s> is discouraged: 50 real tokens
    assert fresh_process[f"{family}/stream"].tolist() == generated


def test_state_names_and_shapes_per_family(exported):
    assert StateLayout(exported["gcnn"][0]).specs == {"state_block_0_conv_0": (2, 8), "state_block_1_conv_1": (2, 4)}
    assert StateLayout(exported["lstm"][0]).specs == {
        "state_lstm_0_h": (8,), "state_lstm_0_c": (8,), "state_lstm_1_h": (8,), "state_lstm_1_c": (8,)}
    assert StateLayout(exported["moe"][0]).specs == {
        "state_lstm_0_h": (16,), "state_lstm_0_c": (24,), "state_lstm_2_h": (16,), "state_lstm_2_c": (16,)}
    metadata = json.load(open(os.path.join(exported["moe"][1], "assets.extra", "zoo_export.json")))
    assert metadata["decode_state"] == {"state_lstm_0_h": [16], "state_lstm_0_c": [24], "state_lstm_2_h": [16],
                                        "state_lstm_2_c": [16]}
    assert metadata["max_tokens"] == MAX_TOKENS and metadata["tokenizer"] == "word"
    assert open(os.path.join(exported["moe"][1], "assets", "vocabulary.txt")).read().split("\n")[:5] == \
        ["<pad>", "<s>", "</s>", "<unk>", "the"]


# ---- 2: saved_model_cli ----------------------------------------------------------------------
def parse_saved_model_cli(text):
    """{signature: {"inputs": {name: (dtype, shape)}, "outputs": {name: (dtype, shape)}}}."""
    out = {}
    blocks = re.split(r"^signature_def\['([^']+)'\]:\s*$", text.split("Concrete Functions:")[0], flags=re.M)
    for name, body in zip(blocks[1::2], blocks[2::2]):
        entry = {"inputs": {}, "outputs": {}}
        for kind, tensor, dtype, shape in re.findall(
                r"(inputs|outputs)\['([^']+)'\] tensor_info:\s*dtype: (\w+)\s*shape: ([^\n]+)", body):
            entry[kind][tensor] = (dtype, shape.strip())
        out[name] = entry
    return out


@pytest.mark.ci
def test_saved_model_cli_lists_the_four_signatures_with_names_and_dtypes(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    proc = subprocess.run([cli, "show", "--dir", exported["gcnn"][1], "--all"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = parse_saved_model_cli(proc.stdout)
    assert set(shown) - {"__saved_model_init_op"} == set(SIGNATURES)
    scores = {name: (dtype, "(-1, -1)" if name == "token_log_probs" else "(-1)") for name, dtype in SCORES.items()}
    assert shown["serving_default"] == {"inputs": {"text": ("DT_STRING", "(-1)")}, "outputs": scores}
    assert shown["score_ids"] == {"inputs": {"token_ids": ("DT_INT32", "(-1, -1)"), "lengths": ("DT_INT32", "(-1)")},
                                  "outputs": scores}
    assert shown["next_token"] == {
        "inputs": {"text": ("DT_STRING", "(-1)"), "k": ("DT_INT32", "unknown_rank")},
        "outputs": {"words": ("DT_STRING", "(-1, -1)"), "ids": ("DT_INT32", "(-1, -1)"),
                    "log_probs": ("DT_FLOAT", "(-1, -1)")}}
    states = {"state_block_0_conv_0": ("DT_FLOAT", "(-1, 2, 8)"), "state_block_1_conv_1": ("DT_FLOAT", "(-1, 2, 4)")}
    assert shown["decode_step"] == {"inputs": {"token_ids": ("DT_INT32", "(-1)"), **states},
                                    "outputs": {"log_probs": ("DT_FLOAT", "(-1, 50)"), **states}}
    assert shown["generate"] == {
        "inputs": {"text": ("DT_STRING", "(-1)"), "max_new_tokens": ("DT_INT32", "()"),
                   "temperature": ("DT_FLOAT", "()"), "top_k": ("DT_INT32", "()"), "top_p": ("DT_FLOAT", "()"),
                   "seed": ("DT_INT32", "()")},
        "outputs": {"text": ("DT_STRING", "(-1)"), "completion": ("DT_STRING", "(-1)"),
                    "ids": ("DT_INT32", "(-1, -1)"), "lengths": ("DT_INT32", "(-1)")}}


@pytest.mark.ci
def test_saved_model_cli_run_generates_what_lm_generate_does(exported, tmp_path):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    model, path = exported["lstm"]
    settings = {"max_new_tokens": 7, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}
    exprs = ";".join([f"text={PROMPTS!r}"] + [f"{k}={v!r}" for k, v in settings.items()])
    proc = subprocess.run([cli, "run", "--dir", path, "--tag_set", "serve", "--signature_def", "generate",
                           "--input_exprs", exprs, "--outdir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = expected(model, "generate", {"text": PROMPTS, **settings})
    got = {name: np.load(tmp_path / f"{name}.npy", allow_pickle=True) for name in want}
    assert_same(got, want, "saved_model_cli run generate")


# ---- 3: docs/serving.md's REST bodies, as TF Serving maps them -------------------------------
def _value(value):
    """A JSON value with TF Serving's {"b64": …} binary strings decoded."""
    if isinstance(value, dict):
        assert set(value) == {"b64"}, value
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value


def _tensor(value, spec, name):
    value = _value(value)
    if spec.dtype.is_integer and np.asarray(value).dtype.kind == "f":
        raise AssertionError(f"{name}: a float where TF Serving expects {spec.dtype.name}")
    array = np.array(value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)
    assert spec.shape.is_compatible_with(array.shape), f"{name}: shape {array.shape} does not fit {spec.shape}"
    return tf.constant(array, spec.dtype)


def _json_value(array):
    if isinstance(array, bytes):  # one string of a row
        return array.decode("utf-8")
    array = np.asarray(array)
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist() if array.size else \
            array.tolist()
    return array.tolist()


def rest_predict(loaded, body, defaults=None):
    """TF Serving's REST `:predict` (row `instances` or columnar `inputs`) on a loaded SavedModel:
    inputs by name with the signature's dtypes, an input the request leaves out taken from the
    SignatureDef's `defaults` (as TF Serving does; `defaults`: `signature_defaults`' answer),
    outputs as TF Serving writes them. Returns `(answer, raw outputs, inputs)`."""
    signature = loaded.signatures[body.get("signature_name", "serving_default")]
    specs = signature.structured_input_signature[1]
    assert ("instances" in body) != ("inputs" in body), "exactly one of instances / inputs"
    if "instances" in body:
        instances = body["instances"]
        if all(isinstance(i, dict) and "b64" not in i for i in instances):
            names = set(instances[0])
            assert all(set(i) == names for i in instances), "every instance names the same inputs"
            columns = {name: [i[name] for i in instances] for name in names}
        else:
            assert len(specs) == 1, "a list of values needs a signature with one input"
            columns = {next(iter(specs)): instances}
    else:
        inputs = body["inputs"]
        columns = inputs if isinstance(inputs, dict) and "b64" not in inputs else {next(iter(specs)): inputs}
    assert set(columns) <= set(specs), f"inputs {sorted(columns)} are not all signature inputs {sorted(specs)}"
    missing = set(specs) - set(columns) - set(defaults or {})
    assert not missing, f"inputs {sorted(columns)} != signature inputs {sorted(specs)} (no default for {sorted(missing)})"
    columns = {**{n: v for n, v in (defaults or {}).items() if n in specs}, **columns}
    outputs = {k: v.numpy() for k, v in signature(**{n: _tensor(v, specs[n], n) for n, v in columns.items()}).items()}
    if "instances" in body:
        batch = len(body["instances"])
        assert all(v.shape[0] == batch for v in outputs.values()), "row format: every output is batched"
        if len(outputs) == 1:
            answer = {"predictions": _json_value(next(iter(outputs.values())))}
        else:
            answer = {"predictions": [{k: _json_value(v[i]) for k, v in sorted(outputs.items())}
                                      for i in range(batch)]}
    else:
        answer = {"outputs": {k: _json_value(v) for k, v in sorted(outputs.items())}}
    return answer, outputs, columns


def readme_examples():
    """The (request, answer) pairs of docs/serving.md's "REST request bodies" section."""
    text = open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8").read()
    pairs = re.findall(r"<!-- tf-serving request -->\s*```json\n(.*?)```\s*"
                       r"<!-- tf-serving answer -->\s*```json\n(.*?)```", text, flags=re.S)
    return [(json.loads(request), json.loads(answer)) for request, answer in pairs]


def assert_answer_close(got, want, where):
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_answer_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_answer_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        # docs/serving.md rounds to 4 decimals
        assert abs(got - want) <= 1e-4 + 1e-5 * abs(want), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.ci
def test_readme_rest_bodies_map_to_signature_calls_with_the_readme_answers(exported, loaded):
    examples = readme_examples()
    seen = {(request.get("signature_name", "serving_default"), "instances" if "instances" in request else "inputs")
            for request, _ in examples}
    assert seen == {(s, f) for s in SIGNATURES for f in ("instances", "inputs")}
    model = exported["gcnn"][0]  # docs/serving.md's examples are this model's answers
    for request, answer in examples:
        signature = request.get("signature_name", "serving_default")
        got, outputs, columns = rest_predict(loaded["gcnn"], request,
                                             signature_defaults(exported["gcnn"][1], signature))
        assert_answer_close(got, answer, f"docs/serving.md {signature} {sorted(request)}")
        inputs = {name: _value(v) for name, v in columns.items()}
        assert_same(outputs, expected(model, signature, inputs), f"docs/serving.md {signature}")


def test_rest_mapping_rejects_what_tf_serving_rejects(loaded):
    with pytest.raises(AssertionError, match="same inputs"):
        rest_predict(loaded["gcnn"], {"signature_name": "next_token",
                                      "instances": [{"text": "the", "k": 2}, {"text": "a"}]})
    with pytest.raises(AssertionError, match="signature inputs"):
        rest_predict(loaded["gcnn"], {"signature_name": "score_ids", "inputs": {"token_ids": [[1, 4, 2]]}})
    with pytest.raises(AssertionError, match="where TF Serving expects int32"):
        rest_predict(loaded["gcnn"], {"signature_name": "score_ids",
                                      "inputs": {"token_ids": [[1.5, 4, 2]], "lengths": [3]}})


# ---- 5: bad input ------------------------------------------------------------------------------
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
    settings = {"max_new_tokens": 6, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}
    got = loaded[family].signatures["generate"](text=tf.constant(BAD), **{k: tf.constant(v) for k, v in settings.items()})
    want = expected(model, "generate", {"text": texts, **settings})
    # the long line: the export keeps its last MAX_TOKENS words (after <s>), in-process reads it all
    prompt = model.vocabulary.encode(texts[2], add_eos=False)
    cut = model.generate(prompt[:1] + prompt[1:][-MAX_TOKENS:], max_new_tokens=6, temperature=0, jit_compile=False)
    want["ids"][2] = cut[-6:]
    want["text"][2] = model.vocabulary.decode(cut)
    assert_same({k: v.numpy() for k, v in got.items()}, want, f"{family} generate on bad text")


GENERATE_ERRORS = [
    ({"max_new_tokens": -1}, r"max_new_tokens must be in \[1, 256\]"),
    ({"max_new_tokens": 0}, r"max_new_tokens must be in \[1, 256\]"),
    ({"max_new_tokens": 257}, r"max_new_tokens must be in \[1, 256\]"),
    ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ({"top_k": -2}, r"top_k must be in \[0, 50\]"),
    ({"top_k": 51}, r"top_k must be in \[0, 50\]"),
    ({"temperature": -0.5}, r"temperature must be >= 0"),
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


def signature_defaults(path, signature):
    """The SignatureDef's `defaults` (the values TF Serving uses for inputs a request leaves out)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    defaults = saved.meta_graphs[0].signature_def[signature].defaults
    return {name: tf.make_ndarray(proto).item() for name, proto in defaults.items()}


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


# ---- 7: versions -------------------------------------------------------------------------------
def _digest(directory):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, directory).encode())
            h.update(open(path, "rb").read())
    return h.hexdigest()


def test_an_existing_version_is_never_overwritten(exported):
    model, path = exported["lstm"]
    base = os.path.dirname(os.path.dirname(path))
    before = _digest(path)
    with pytest.raises(export.ExportError, match=r"Version 1 of 'lstm' already exists .* never overwritten"):
        export.export_saved_model(model, base, "lstm", version=1)
    assert _digest(path) == before
    assert sorted(os.listdir(os.path.dirname(path))) == ["1"]


def test_a_failed_write_leaves_no_partial_version(exported, monkeypatch):
    model, path = exported["gcnn"]
    model_dir = os.path.dirname(path)
    before = _digest(path)

    def disk_full(root, tmp, signatures):
        with open(os.path.join(tmp, "saved_model.pb"), "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(export.saved_model, "write_archive", disk_full)
    with pytest.raises(export.ExportError) as info:
        export.export_saved_model(model, os.path.dirname(model_dir), "gcnn")
    message = str(info.value)
    assert message == (f"Could not write version 2 of 'gcnn' under {model_dir}: No space left on device; "
                       "the partial export was removed.")
    assert sorted(os.listdir(model_dir)) == ["1"]  # no version 2, no temporary directory
    assert _digest(path) == before


@contextlib.contextmanager
def as_nobody():
    """Permission checks as an unprivileged user (root writes to read-only directories)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_a_read_only_base_directory_fails_in_one_sentence_and_writes_nothing(exported):
    model, _ = exported["gcnn"]
    top = tempfile.mkdtemp()
    try:
        os.chmod(top, 0o755)
        base = os.path.join(top, "exports")
        os.makedirs(os.path.join(base, "old", "1"))
        os.chmod(os.path.join(base, "old"), 0o555)
        os.chmod(base, 0o555)
        with as_nobody():
            with pytest.raises(export.ExportError) as new_model:
                export.export_saved_model(model, base, "gcnn")
            with pytest.raises(export.ExportError) as new_version:
                export.export_saved_model(model, base, "old")
        assert str(new_model.value) == (f"Cannot create the model directory {base}/gcnn: Permission denied; "
                                        "nothing was written.")
        assert str(new_version.value) == (f"Could not write version 2 of 'old' under {base}/old: Permission "
                                          "denied; the partial export was removed.")
        assert sorted(os.listdir(base)) == ["old"] and sorted(os.listdir(os.path.join(base, "old"))) == ["1"]
    finally:
        for d in (os.path.join(top, "exports", "old"), os.path.join(top, "exports")):
            if os.path.isdir(d):
                os.chmod(d, 0o755)
        shutil.rmtree(top)


def test_the_version_is_one_above_the_highest_present(exported, tmp_path):
    model, path = exported["gcnn"]
    base = tmp_path / "exports"
    os.makedirs(base / "gcnn" / "7")
    os.makedirs(base / "gcnn" / "not-a-version")
    assert export.existing_versions(str(base / "gcnn")) == [7]
    calls = []
    # the SavedModel itself is tested above: here only the version arithmetic
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(export.saved_model, "_write", lambda m, p, *a: calls.append(p) or open(os.path.join(p, "x"), "w").close())
        assert export.export_saved_model(model, str(base), "gcnn") == str(base / "gcnn" / "8")
        assert export.export_saved_model(model, str(base), "gcnn", version=3) == str(base / "gcnn" / "3")
    assert sorted(os.listdir(base / "gcnn")) == ["3", "7", "8", "not-a-version"]
    assert all(os.path.basename(p).startswith(".") for p in calls)  # written beside, renamed into place


@pytest.mark.parametrize("kwargs, message", [
    ({"name": ""}, "model name"), ({"name": "../x"}, "model name"), ({"version": 0}, "version must be"),
    ({"max_tokens": 0}, "max_tokens"),
])
def test_bad_arguments_raise_before_writing(exported, tmp_path, kwargs, message):
    model, _ = exported["gcnn"]
    args = {"name": "m", **kwargs}
    with pytest.raises(ValueError, match=message):
        export.export_saved_model(model, str(tmp_path), **args)
    assert os.listdir(tmp_path) == []


def test_a_model_without_vocabulary_is_refused(tmp_path):
    model = tiny_lstm()
    with pytest.raises(ValueError, match="no vocabulary"):
        export.export_saved_model(model, str(tmp_path), "m")


@pytest.mark.ci
def test_a_character_model_generates_through_the_export_as_in_process(tmp_path):
    """A character vocabulary (U+2581 for a space) detokenised in the graph: the signature's text
    is what `lm.generate` returns, greedy and seeded, with odd characters in the prompts."""
    from zoo.data.vocab import CharacterVocabulary

    chars = list("abcdefghijklmnopqrstuvwxyz") + ["\u2581", "é", "中"]
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=len(SPECIALS) + len(chars), embedding_dim=8, blocks=[[[3, 16]]])
    model.vocabulary = CharacterVocabulary(list(SPECIALS) + chars)
    _discourage_end_of_sentence(model)
    path = export.export_saved_model(model, str(tmp_path), "chars")
    generate = tf.saved_model.load(path).signatures["generate"]
    prompts = ["the cat", "", "café 中文 x"]
    for settings in ({"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0},
                     {"temperature": 0.9, "top_k": 10, "top_p": 0.9, "seed": 5}):
        got = generate(text=tf.constant(prompts), max_new_tokens=tf.constant(12),
                       **{k: tf.constant(v) for k, v in settings.items()})
        kw = {"temperature": 0} if settings["temperature"] == 0 else \
            {"temperature": settings["temperature"], "top_k": settings["top_k"], "top_p": settings["top_p"]}
        want = model.generate(prompts, max_new_tokens=12, seed=settings["seed"], jit_compile=False, **kw)
        assert [t.decode() for t in got["text"].numpy()] == want
        assert all("\u2581" not in text for text in want) and want[2].startswith("café 中")  # spaces as spaces
