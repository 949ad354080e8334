"""A snapshot of what the zoo does, to compare two commits (a structure change must change nothing):

    python tests/behaviour_snapshot.py OUT.json     # run from outside the checkout, in each commit's venv
    python tests/behaviour_snapshot.py --compare A.json B.json

It records, with public APIs that both sides have:
- the training losses of three families (a GCNN, an LSTM, a GCNN with a sparse MoE), tiny
  configurations on a corpus it writes, every step's loss through a `Callback`;
- the generations of the trained `gcnn-ptb` in every sampler setting (greedy, temperature,
  top-k, top-p, beam, all beams, no-repeat n-grams, a stop string, id prompts, XLA on and off),
  and of a tiny MoE model;
- the outputs of every signature of an export of the trained `gcnn-ptb`, loaded with TensorFlow;
- each tokenizer kind (the treebank's words, characters, `gcnn-en`'s subwords) on awkward text:
  ids, decoded text, token texts, per-word indices; and `gcnn-en`'s per-word scores, generations
  and served outputs;
- the README's main job with a step budget instead of a time budget (`zoo train` on the treebank,
  `zoo evaluate`), its printed lines without the timings.
Floats are kept to 6 significant digits; the comparison names every key that differs.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

ROUND = 6


def rounded(value):
    if isinstance(value, float):
        return float(f"{value:.{ROUND}g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def corpus(directory):
    import random

    rng = random.Random(0)
    words = [f"w{i}" for i in range(40)]
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        with open(os.path.join(directory, f"{split}.txt"), "w") as f:
            for _ in range(n):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "\n")
    return directory


def training_losses(work):
    from zoo.training import Callback, TrainConfig, train

    os.makedirs(os.path.join(work, "data"))
    data = corpus(os.path.join(work, "data"))
    families = {
        "gcnn": ("gcnn-ptb", {"embedding_dim": 16, "blocks": [[[3, 16]], [[3, 16]]], "dropout": 0.1}),
        "lstm": ("lstm-ptb", {"embedding_dim": 16, "layers": [{"type": "lstm", "units": 16}], "dropout": 0.1}),
        "gcnn-moe": ("gcnn-moe-ptb", {"embedding_dim": 16, "blocks": [[[3, 16]], [[3, 16]]],
                                      "moe": {"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8}}),
    }
    out = {}
    for family, (preset, overrides) in families.items():
        losses = []
        config = TrainConfig(steps=8, global_batch_size=4, seq_len=8, steps_per_epoch=4, seed=3)
        model, history = train(preset, data=data, out_dir=os.path.join(work, family), config=config,
                               overrides=overrides, log=lambda m: None,
                               callbacks=[Callback(on_step_end=lambda step, loss: losses.append(float(loss)))])
        out[family] = {"losses": losses, "val": [h.get("val_perplexity") for h in history]}
    return out


SETTINGS = {
    "greedy": dict(sampler="greedy"),
    "temperature": dict(temperature=0.8, seed=1),
    "top_k": dict(top_k=5, seed=2),
    "top_p": dict(top_p=0.9, seed=3),
    "beam": dict(sampler="beam", num_beams=3),
    "beam_penalty": dict(sampler="beam", num_beams=3, length_penalty=0.5),
    "all_beams": dict(sampler="beam", num_beams=2, return_all_beams=True),
    "no_repeat": dict(sampler="greedy", no_repeat_ngram_size=2),
    "stop": dict(sampler="greedy", stop="the"),
    "no_stop": dict(sampler="greedy", stop=None),
    "xla_off": dict(top_k=5, seed=4, jit_compile=False),
    "xla_on": dict(top_k=5, seed=4, jit_compile=True),
}
PROMPTS = ["the company said", "", "shares of the"]


def generations():
    import zoo

    lm = zoo.load("gcnn-ptb", weights="trained")
    out = {name: lm.generate(PROMPTS, max_new_tokens=6, **kw) for name, kw in SETTINGS.items()}
    out["ids"] = lm.generate([[1, 4, 5], [1, 9]], 4, sampler="greedy")
    import keras

    keras.utils.set_random_seed(0)
    moe = zoo.load("gcnn-moe-ptb", weights="random", embedding_dim=16, blocks=[[[3, 16]], [[3, 16]]],
                   moe={"after_blocks": [0], "num_experts": 4, "k": 2, "hidden_units": 8})
    out["moe_random_weights"] = {name: moe.generate(PROMPTS, max_new_tokens=4, **kw)
                                 for name, kw in SETTINGS.items() if name != "xla_on"}
    return out


def served(work):
    import numpy as np
    import tensorflow as tf

    import zoo
    from zoo.export import export_saved_model

    path = export_saved_model(zoo.load("gcnn-ptb", weights="trained"), os.path.join(work, "exports"), "gcnn")
    sigs = tf.saved_model.load(path).signatures
    text = tf.constant(["the company said it", "", "shares of the dollar fell"])
    calls = {
        "serving_default": dict(text=text),
        "score_ids": dict(token_ids=tf.constant([[1, 4, 5, 6], [1, 9, 0, 0]], tf.int32),
                          lengths=tf.constant([4, 2], tf.int32)),
        "next_token": dict(text=text, k=tf.constant(3)),
        "generate": dict(text=text, max_new_tokens=tf.constant(5), temperature=tf.constant(0.0),
                         top_k=tf.constant(0), top_p=tf.constant(1.0), seed=tf.constant(1), num_beams=tf.constant(1)),
        "generate_sampled": dict(text=text, max_new_tokens=tf.constant(5), temperature=tf.constant(0.9),
                                 top_k=tf.constant(10), top_p=tf.constant(0.95), seed=tf.constant(7),
                                 num_beams=tf.constant(1)),
        "generate_beams": dict(text=text, max_new_tokens=tf.constant(5), temperature=tf.constant(0.0),
                               top_k=tf.constant(0), top_p=tf.constant(1.0), seed=tf.constant(1),
                               num_beams=tf.constant(3)),
    }
    out = {"signatures": sorted(sigs.keys())}
    for name, kwargs in calls.items():
        signature = sigs[name.split("_")[0] if name.startswith("generate") else name]
        result = signature(**kwargs)
        out[name] = {k: (np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(v.numpy()).tolist()
                         if v.dtype == tf.string else
                         np.round(v.numpy().astype(np.float64), 4).tolist()) for k, v in sorted(result.items())}
    decode = sigs["decode_step"]
    inputs = {k: tf.zeros(v.shape.as_list()[:1] and [2] + v.shape.as_list()[1:], v.dtype)
              for k, v in decode.structured_input_signature[1].items()}
    inputs["token_ids"] = tf.constant([1, 4], tf.int32)
    out["decode_step"] = {k: np.round(v.numpy().astype(np.float64), 4).tolist()
                          for k, v in sorted(decode(**inputs).items()) if k != "state" and v.shape.rank <= 2}
    return out


AWKWARD = ["the company said", "  The\tcompany\u00a0said\u2028it ", "", "é café 日本語 😀 \u2581x",
           "<s> the </s> <unk>", "x" * 300, "Кириллица and \u0301 combining", "a\x00b \x1c c"]


def tokenizers():
    import zoo
    from zoo.data import CharTokenizer, ptb_tokenizer

    en = zoo.load("gcnn-en", weights="trained")
    kinds = {"word": ptb_tokenizer(), "char": CharTokenizer.build(AWKWARD[:5] + ["plain text"]), "subword": en.tokenizer}
    out = {}
    for kind, tokenizer in kinds.items():
        ids = [tokenizer.encode(text) for text in AWKWARD]
        out[kind] = {"ids": ids, "decoded": [tokenizer.decode(row) for row in ids],
                     "with_specials": [tokenizer.decode(row, strip_specials=False) for row in ids],
                     "texts": [tokenizer.token_texts(row) for row in ids],
                     "words": [tokenizer.word_index(row) for row in ids],
                     "normalized": [tokenizer.normalize(text) for text in AWKWARD],
                     "bytes": tokenizer.encode(b"caf\xe9 \xe2\x82 the")}
    out["gcnn-en"] = {"score": [[float(x) for x in row] for row in en.score(AWKWARD[:2] + AWKWARD[3:5])],
                      "greedy": en.generate(AWKWARD[:2], max_new_tokens=8, sampler="greedy"),
                      "sampled": en.generate(AWKWARD[:2], max_new_tokens=8, top_p=0.9, seed=3)}
    return out


def served_subword(work):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops)

    import zoo
    from zoo.export import export_saved_model

    path = export_saved_model(zoo.load("gcnn-en", weights="trained"), os.path.join(work, "exports"), "en")
    sigs = tf.saved_model.load(path).signatures
    text = tf.constant(AWKWARD[:2] + AWKWARD[3:5] + ["caf\xe9".encode("latin-1")])
    out = {}
    for name, signature, kwargs in [
            ("serving_default", "serving_default", dict(text=text)),
            ("next_token", "next_token", dict(text=text, k=tf.constant(3))),
            ("generate", "generate", dict(text=text, max_new_tokens=tf.constant(6), temperature=tf.constant(0.0),
                                          top_k=tf.constant(0), top_p=tf.constant(1.0), seed=tf.constant(1),
                                          num_beams=tf.constant(1)))]:
        result = sigs[signature](**kwargs)
        out[name] = {k: (np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(v.numpy()).tolist()
                         if v.dtype == tf.string else
                         np.round(v.numpy().astype(np.float64), 4).tolist()) for k, v in sorted(result.items())}
    return out


def readme_job(work):
    run = os.path.join(work, "readme-run")
    commands = [["zoo", "train", "--preset", "gcnn-ptb", "--data", "ptb", "--out", run, "--steps", "30",
                 "--steps-per-epoch", "15", "--log-every", "5"],
                ["zoo", "evaluate", os.path.join(run, "best"), "--data", "ptb", "--split", "valid", "--mode", "stream"]]
    lines = []
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, cwd=work)
        lines += [re.sub(r"\s+[\d,.]+ tokens/s.*$|\bin [\d.]+ s\b", "", line).replace(work, "WORK")
                  for line in result.stdout.splitlines() if line.strip()]
        lines.append(f"rc={result.returncode}")
    return lines


def snapshot(path):
    with tempfile.TemporaryDirectory() as work:
        out = {"training": training_losses(work), "generations": generations(), "served": served(work),
               "tokenizers": tokenizers(), "served_subword": served_subword(work), "readme": readme_job(work)}
    with open(path, "w") as f:
        json.dump(rounded(out), f, indent=1, sort_keys=True)


def differences(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        with open(sys.argv[2]) as f, open(sys.argv[3]) as g:
            found = differences(json.load(f), json.load(g))
        print("\n".join(found[:50]) or "equal")
        sys.exit(1 if found else 0)
    snapshot(sys.argv[1])
