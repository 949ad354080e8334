"""What the word-model export tests share (export/export_test.py, export/saved_model_test.py and
export/signatures_test.py import it as `tests.export_checks`; their exports are export/conftest.py's
`exported` and `loaded` fixtures): the vocabulary of docs/serving.md's examples, the tiny models
of each family, the in-process model's answer to each signature call, and the comparison. Not
part of the installed package."""

import os

import numpy as np
import tensorflow as tf

import zoo.export as export
from zoo.data.vocab import SPECIALS, WordTokenizer
from zoo.export.state import StateLayout

WORDS = ("the a cat dog sat on mat big small red ran to house is was and of in it he she saw "
         "bird tree green blue old new man woman child ate fish bread with under over by at "
         "home park car road fast slow sun").split()


MAX_TOKENS = export.DEFAULT_MAX_TOKENS


SIGNATURES = ("serving_default", "score_ids", "next_token", "decode_step", "generate")


GENERATE_DEFAULTS = {"max_new_tokens": 20, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0, "num_beams": 1}
TEXTS = ["the cat sat on the mat", "a big dog", "", "the zebra ate   fish\tat home"]


def vocabulary():
    return WordTokenizer(list(SPECIALS) + WORDS)


def discourage_end_of_sentence(model):
    """</s> (id 2, in the head) 6 nats less likely: greedy decoding of these untrained models then
    runs for its whole length instead of stopping at once."""
    bias = model.head.head_bias if hasattr(model.head, "head_bias") else model.head.bias
    value = bias.numpy()
    value[2] -= 6.0
    bias.assign(value)


# The exported models, built from conftest.py's `tiny_model` factory (its seeded construction,
# with the overrides each needs): an adaptive softmax, a tied full softmax, lstm-ptb's shape
# (conftest's "lstm" as it is) and an LSTM–MoE–LSTM stack whose gates route tokens apart.
def tiny_gcnn(tiny_model):
    return tiny_model("gcnn", blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]], cutoffs=[10, 30])


def tiny_tied_gcnn(tiny_model):
    """A GCNN whose full softmax is its embedding, transposed (tie_embeddings), with embedding dropout."""
    return tiny_model("gcnn", blocks=[[[3, 8]], [[2, 8]]], tie_embeddings=True, embedding_dropout=0.2, dropout=0.1)


def tiny_lstm(tiny_model):
    return tiny_model("lstm")


def tiny_moe(tiny_model):
    layers = [{"type": "lstm", "units": 24, "projection": 16},
              {"type": "moe", "num_experts": 8, "k": 2, "hidden_units": 8, "groups": 2},
              {"type": "lstm", "units": 16}]
    model = tiny_model("moe", embedding_dim=16, layers=layers)
    # The gates start at zero (every token to the first experts): random ones route tokens apart.
    moe = model.stack[1]
    rng = np.random.default_rng(0)
    moe.gate_kernel.assign(rng.standard_normal(moe.gate_kernel.shape).astype("float32"))
    moe.secondary_gate_kernel.assign(rng.standard_normal(moe.secondary_gate_kernel.shape).astype("float32"))
    return model


def quantized(make):
    """The same tiny model with its weights in int8 (`LanguageModel.quantize`)."""
    def make_quantized(tiny_model):
        model = make(tiny_model)
        model.quantize("int8")
        return model
    return make_quantized


FAMILIES = {"gcnn": tiny_gcnn, "gcnn-tied": tiny_tied_gcnn, "lstm": tiny_lstm, "moe": tiny_moe,
            # int8: the GLU convolutions, adaptive softmax and embedding; the LSTMP cells and full softmax
            "gcnn-int8": quantized(tiny_gcnn), "moe-int8": quantized(tiny_moe)}


# ---- what the in-process model says -------------------------------------------------------
def pad(rows, value, dtype):
    """`rows` of different lengths as one array, padded with `value` on the right."""
    width = max([len(r) for r in rows] + [0])
    out = np.full((len(rows), width), value, dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _scores(rows):
    total = np.array([np.sum(r, dtype=np.float64) for r in rows])
    lengths = np.array([len(r) for r in rows], np.int32)
    return {"token_log_probs": pad(rows, 0.0, np.float32), "lengths": lengths, "log_prob": total,
            "perplexity": np.exp(-total / np.maximum(lengths, 1))}


def expected(model, signature, inputs):
    """The in-process model's answer to a signature call (numpy inputs by name)."""
    vocab = model.tokenizer
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
            missing = top - len(order)
            ids.append(order + [-1] * missing)
            words.append([vocab.tokens[i] for i in order] + [""] * missing)
            log_probs.append([lp[i] for i in order] + [0.0] * missing)
        return {"ids": np.array(ids, np.int32).reshape(len(texts), top),
                "words": np.array(words, object).reshape(len(texts), top),
                "log_probs": np.array(log_probs, np.float32).reshape(len(texts), top)}
    if signature == "generate":
        settings = {**GENERATE_DEFAULTS, **{k: np.asarray(v).item() for k, v in inputs.items() if k != "text"}}
        # the SavedModel runs the graph loop: the in-process one with the same draws is jit_compile=False
        kw = {"max_new_tokens": int(settings["max_new_tokens"]), "seed": int(settings["seed"]), "jit_compile": False}
        if settings["num_beams"] > 1:  # beam search: the sampling settings unused
            kw.update(sampler="beam", num_beams=int(settings["num_beams"]))
            kw.pop("seed")
        elif settings["temperature"] == 0:
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
                "ids": pad(new, 0, np.int32), "lengths": np.array([len(r) for r in new], np.int32)}
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


def signature_defaults(path, signature):
    """The SignatureDef's `defaults` (the values TF Serving uses for inputs a request leaves out)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    defaults = saved.meta_graphs[0].signature_def[signature].defaults
    return {name: tf.make_ndarray(proto).item() for name, proto in defaults.items()}
