"""SavedModel export for TF Serving, end to end: the word-model exports of export/conftest.py (a
GCNN with an adaptive softmax, a tied GCNN, an LSTM baseline and an LSTM–MoE–LSTM stack) checked
against the in-process models.

- a fresh Python process that imports only TensorFlow (the repository not even importable)
  loads every export, calls every signature and streams greedy generation through
  `decode_step`; its results equal `score` / `log_probs` / `decode_step` / `generate` here;
- `saved_model_cli show --all` lists the signatures with their names and dtypes, and
  `saved_model_cli run` generates what `lm.generate` does;
- the TF Serving request bodies of docs/serving.md, mapped to signature calls the way TF
  Serving's REST API maps them, give that page's answers and the in-process model's numbers.

(Versions, refusals and metadata: saved_model_test.py; each signature's outputs on bad input and
bad settings: signatures_test.py.)
"""

import base64
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from zoo.export.state import StateLayout
from tests.export_checks import (FAMILIES, SIGNATURES, TEXTS, assert_same, expected,
                                 signature_defaults)

# Every test here needs a whole export first (a session fixture): the capability tier.
pytestmark = pytest.mark.ci

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCORES = {"token_log_probs": "DT_FLOAT", "lengths": "DT_INT32", "log_prob": "DT_FLOAT", "perplexity": "DT_FLOAT"}


# ---- a fresh process with TensorFlow only ------------------------------------------------
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

IDS = [[1, 4, 6, 7, 2, 0], [1, 9, 20, 3, 11, 2], [1, 33, 2, 0, 0, 0]]
LENGTHS = [5, 6, 3]
PREFIXES = ["the cat", "", "a dog ran to the"]
K = [3, 5, 1]
DECODE_IDS = np.random.default_rng(3).integers(0, 50, size=(3, 7)).T.tolist()  # 7 steps of 3 sequences
PROMPT = "the big cat"
STREAM_LENGTH = 50
PROMPTS = ["the big cat", "", "a dog ran to the old house and the"]  # mixed lengths, an empty one
GENERATE = {"greedy": {"max_new_tokens": 12, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 1},
            "top_k": {"max_new_tokens": 9, "temperature": 0.8, "top_k": 5, "top_p": 1.0, "seed": 3, "num_beams": 1},
            "top_p": {"max_new_tokens": 9, "temperature": 1.2, "top_k": 0, "top_p": 0.7, "seed": 4, "num_beams": 1},
            "beams": {"max_new_tokens": 6, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 3}}


@pytest.fixture(scope="module")
def fresh_process(exported, tmp_path_factory):
    work = tmp_path_factory.mktemp("fresh")
    plan = {family: {"path": path, "texts": TEXTS, "ids": IDS, "lengths": LENGTHS, "prefixes": PREFIXES,
                     "k": K, "decode_ids": DECODE_IDS, "max_length": STREAM_LENGTH, "never": [0, 1], "eos": 2,
                     "prompt": model.tokenizer.encode(PROMPT, add_eos=False), "prompts": PROMPTS,
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
    prompt = model.tokenizer.encode(PROMPT, add_eos=False)
    generated = model.generate(prompt, max_new_tokens=STREAM_LENGTH, temperature=0)[len(prompt):]
    assert len(generated) == STREAM_LENGTH  # </s> is discouraged: 50 real tokens
    assert fresh_process[f"{family}/stream"].tolist() == generated


# ---- saved_model_cli -------------------------------------------------------------------------
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
                   "seed": ("DT_INT32", "()"), "num_beams": ("DT_INT32", "()")},
        "outputs": {"text": ("DT_STRING", "(-1)"), "completion": ("DT_STRING", "(-1)"),
                    "ids": ("DT_INT32", "(-1, -1)"), "lengths": ("DT_INT32", "(-1)")}}


@pytest.mark.ci
def test_saved_model_cli_run_generates_what_lm_generate_does(exported, tmp_path):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    model, path = exported["lstm"]
    settings = {"max_new_tokens": 7, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 1}
    exprs = ";".join([f"text={PROMPTS!r}"] + [f"{k}={v!r}" for k, v in settings.items()])
    proc = subprocess.run([cli, "run", "--dir", path, "--tag_set", "serve", "--signature_def", "generate",
                           "--input_exprs", exprs, "--outdir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = expected(model, "generate", {"text": PROMPTS, **settings})
    got = {name: np.load(tmp_path / f"{name}.npy", allow_pickle=True) for name in want}
    assert_same(got, want, "saved_model_cli run generate")


# ---- docs/serving.md's REST bodies, as TF Serving maps them ----------------------------------
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
