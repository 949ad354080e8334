"""`export_litert`: a model of the zoo as one LiteRT (TensorFlow Lite) flatbuffer, for a phone or a
lean CPU server where a TensorFlow runtime is not an option.

`export_litert(lm, path)` writes the directory `path` with three things in it:

- `model.tflite`: the flatbuffer, with four signatures (batch 1):
  - `prefill`: `token_ids` int32 `[1, time]` (a prompt's ids, `<s>` first; time ≥ 1) →
    `token_log_probs` float32 `[1, time − 1]` (the log-probability of ids 1 … time−1, each given
    what precedes it: what `lm.score(ids)` gives), `log_probs` float32 `[1, vocabulary]` (the
    next token's, after the whole prompt) and `state` float32 `[1, state size]` (the decoding
    state after the prompt);
  - `decode`: `token_ids` int32 `[1]` and `state` float32 `[1, state size]` → `log_probs`
    float32 `[1, vocabulary]` (the token after it) and `state` (the new state); the state before
    the first token is all zeros;
  - `sample`: `log_probs` float32 `[1, vocabulary]`, `noise` float32 `[1, vocabulary]` (uniform
    in (0, 1), one number per id), `temperature` float32 `[1]` (> 0), `top_k` int32 `[1]` (the
    vocabulary size or more: no top-k) and `top_p` float32 `[1]` (1 or more: no top-p) →
    `token_ids` int32 `[1]`: a draw among the library's own candidates
    (`zoo.models.samplers.candidates`, the rule of `lm.generate`'s random, top-k and top-p
    samplers) by the Gumbel-max trick on the given noise (the candidate maximising
    `logit − log(−log(noise[id]))`). The noise comes from the caller (the runtime makes it from a
    request's seed), since LiteRT's random ops fix their seed when the file is made;
  - `greedy`: `token_ids` int32 `[1, GREEDY_STEPS]` and `count` int32 `[1]` (the first `count`
    of them, 1 to 64, are fed first: a whole prompt, `<s>` first, after the zero state, or the last
    id of the previous call after the state it returned), `state` and `steps` int32 `[1]` (1 to
    `GREEDY_STEPS`) → `token_ids` int32 `[1, GREEDY_STEPS]` (the first `steps` are greedy tokens,
    each the likeliest id that generation may write, the first lowest of equals, as `tf.argmax`;
    the rest 0) and `state`: after the fed ids and every new one but the last, which the next call
    feeds. A `WHILE` loop of `decode`'s steps inside the file, so a client makes one call for a
    short prompt and up to 64 tokens instead of one a token, and no token is computed that is
    thrown away (on the small presets the calls cost more than reading the weights:
    docs/serving.md). An int8 file leaves it out for a tied model, or where its subgraphs' copies
    of the per-row scales would take the file past `INT8_SHARE` of float32's (`convert`).
- the tokenizer's files, as a preset directory holds them (`Tokenizer.save`);
- `zoo_litert.json`: what is inside (`describe`): the family and its config, the vocabulary size
  and special ids, the ids generation never writes (`never_emitted`), each signature's inputs and
  outputs with their shapes and dtypes as the flatbuffer records them, the state's layout, the
  sampling rule, the quantization, the ops the file uses and the zoo's version.

The package `zoo_litert` (runtime/, `pip install ./runtime`) reads such a directory without
TensorFlow: `score`, `generate` with its samplers and stop strings, tokenizing from these files.

The state is ONE float32 tensor, the family's state tensors (those of the SavedModel's
`decode_step`, `zoo.export.state`) flattened and laid end to end in the order `zoo_litert.json`
lists them under `state.layout` (`name`, `offset`, `size`, `shape` without the batch axis), so a
client makes one call per token and copies one buffer. A GCNN's is its conv layers' last k − 1
inputs, an LSTM's each layer's `h` and `c`.

How it is made: each signature is traced as a `tf.function` from the family's own pieces (its
`served_hidden` and `prefill` for `prefill`, its `step` for `decode`, the samplers' `candidates`
for `sample`; the output layer's `log_prob` for every score, the target's gathered from it, as
`Signatures` and `decode_step` compute them); the functions are saved together in one SavedModel
whose root tracks the model's variables, and the converter freezes them to constants, each weight
once for every signature (`tf.lite.TFLiteConverter.from_saved_model`, LiteRT's built-in ops
only, `TFLITE_BUILTINS`: an op without a built-in kernel fails the export, it is never carried as
a TensorFlow op). A weight-normalised
conv layer's kernel is folded (`g · v / ‖v‖` computed once, as the SavedModel does).

Every family converts to built-in ops: GCNN (full, tied and adaptive-softmax output layers),
LSTM, LSTMP and Elman stacks, and LSTM–MoE–LSTM stacks, whose sparse dispatch (top-k,
`UNSORTED_SEGMENT_SUM`, gathers of sizes known only at run time) has LiteRT built-in kernels.

`quantize="int8"`: the converter's dynamic-range quantization (`tf.lite.Optimize.DEFAULT`):
every large weight matrix (the embedding, the convolutions, the LSTM kernels, the output
layer's) stored as int8 with a float32 scale per output channel, the activations quantized on the
fly, so that LiteRT's int8 kernels (XNNPACK's) compute the products from int8: a quarter of the
bytes read per token (the embedding's table, which a gather reads, with one scale for the table;
a tied table is then stored once, read by both from the output layer's int8 rows:
`zoo.export.litert_tables`). The weights of `lm.quantize("int8")` are not used: in the graph they are
dequantized to float32 before each product (the zoo's int8 layers compute in float32), so the
converter would see float32 products, and the file would gain nothing but size. A model
already quantized with `lm.quantize` is refused; export its float32 weights with
`quantize="int8"`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from zoo.errors import reason
from zoo.export.litert_tables import share_tied_table
from zoo.export.saved_model import ExportError, check_tokenizer, saved_variables
from zoo.export.state import StateLayout
from zoo.models import decoding, generation
from zoo.models.samplers import candidates

if TYPE_CHECKING:
    import zoo

MODEL_FILE = "model.tflite"
METADATA_FILE = "zoo_litert.json"
FLATBUFFER_LIMIT = 2**31  # LiteRT's flatbuffers cannot pass 2 GiB
QUANTIZATIONS = (None, "int8")
BYTES_PER_WEIGHT = {None: 4, "int8": 1}  # the estimate checked against FLATBUFFER_LIMIT
SIGNATURES = ("prefill", "decode", "sample", "greedy")
GREEDY_STEPS = 64  # the most tokens of one `greedy` call; its `steps` input asks for fewer
INT8_SHARE = 0.30  # an int8 file past this share of float32's goes without greedy


class FlatState:
    """A family's decoding state (`StateLayout`'s named tensors) as one float32 tensor
    `[batch, size]`: each named tensor flattened, laid end to end in `StateLayout`'s order.

    `layout`: `[{"name", "offset", "size", "shape"}]`, the shape without the batch axis."""

    def __init__(self, model):
        self.named = StateLayout(model)
        self.layout, offset = [], 0
        for name, shape in self.named.specs.items():
            size = int(np.prod(shape))
            self.layout.append({"name": name, "offset": offset, "size": size, "shape": list(shape)})
            offset += size
        self.size = offset

    def pack(self, nested):
        named = self.named.flatten(nested)
        if not self.layout:
            return tf.zeros([1, 0], tf.float32)
        return tf.concat([tf.reshape(tf.cast(named[part["name"]], tf.float32), [1, part["size"]])
                          for part in self.layout], axis=1)

    def unpack(self, flat):
        named = {part["name"]: tf.reshape(flat[:, part["offset"]:part["offset"] + part["size"]], [1] + part["shape"])
                 for part in self.layout}
        return self.named.unflatten(named, 1)


def _functions(model, state):
    """`{signature: (python function, input specs)}`, batch 1."""

    def prefill(token_ids):
        length = tf.shape(token_ids)[1]
        # every position's distribution (the output layer's log_prob), the targets' gathered from
        # it: an adaptive softmax's target_log_prob picks rows by cluster with sizes known only
        # at run time, and a full softmax's is a TensorFlow op with no LiteRT kernel
        log_probs = tf.cast(model.head.log_prob(model.served_hidden(token_ids)), tf.float32)
        # each position's target picked from the whole [1, length, vocabulary] (the last position's
        # a dummy, dropped after): slicing off the last row first would copy all the others
        targets = tf.concat([token_ids[:, 1:], token_ids[:, :1]], axis=1)
        token_log_probs = tf.gather(log_probs, targets, batch_dims=2)[:, :-1]
        _, nested = decoding.prefill(model, token_ids, tf.reshape(length, [1]))
        return {"token_log_probs": token_log_probs, "log_probs": log_probs[:, -1], "state": state.pack(nested)}

    def decode(token_ids, flat_state):
        hidden, nested = model.step(token_ids, state.unpack(flat_state))
        return {"log_probs": tf.cast(model.head.log_prob(hidden), tf.float32), "state": state.pack(nested)}

    def one_product_a_layer(fn):
        # a token's step in LiteRT, which runs its ops one after another: each gated layer's values
        # and gates in one product, not two (results/benchmarks/litert.md)
        def traced(*args):
            with generation.loop_invariants(model, split_products=False):
                return fn(*args)
        return traced

    vocabulary = int(model.vocabulary_size)
    return {
        "prefill": (prefill, [tf.TensorSpec([1, None], tf.int32, name="token_ids")]),
        "decode": (one_product_a_layer(decode), [tf.TensorSpec([1], tf.int32, name="token_ids"),
                            tf.TensorSpec([1, state.size], tf.float32, name="state")]),
        "sample": (lambda *args: {"token_ids": sample(vocabulary, *args)},
                   [tf.TensorSpec([1, vocabulary], tf.float32, name="log_probs"),
                    tf.TensorSpec([1, vocabulary], tf.float32, name="noise"),
                    tf.TensorSpec([1], tf.float32, name="temperature"),
                    tf.TensorSpec([1], tf.int32, name="top_k"),
                    tf.TensorSpec([1], tf.float32, name="top_p")]),
        "greedy": (one_product_a_layer(_greedy(model, state)), [
            tf.TensorSpec([1, GREEDY_STEPS], tf.int32, name="token_ids"), tf.TensorSpec([1], tf.int32, name="count"),
            tf.TensorSpec([1, state.size], tf.float32, name="state"), tf.TensorSpec([1], tf.int32, name="steps")]),
    }


def _greedy(model, state):
    """The `greedy` signature's function: a prompt's (or a previous call's last) ids fed, then
    `steps` (at most `GREEDY_STEPS`) greedy tokens, in one call, a loop in the file, not one call a
    token. Each turn feeds one id (a given one while any is left, else the one just chosen) and
    chooses the next from a full or tied softmax's logits, whose largest is the largest
    log-probability's (a log-softmax over the vocabulary would cost a pass more a token). The last
    id chosen is not fed: the next call feeds it first, so a call computes no token it throws
    away, and no distribution is handed back."""
    never = np.zeros([1, int(model.vocabulary_size)], np.float32)
    never[0, list(generation.never_emitted(model))] = -np.inf
    head = model.head
    compared = head.logits if hasattr(head, "logits") else head.log_prob

    def greedy(token_ids, count, flat_state, steps):
        given = tf.clip_by_value(count[0], 1, GREEDY_STEPS)
        turns = given + tf.clip_by_value(steps[0], 1, GREEDY_STEPS) - 1

        def body(turn, chosen, nested, ids):
            fed = tf.where(turn < given, token_ids[:, tf.minimum(turn, GREEDY_STEPS - 1)], chosen)
            hidden, nested = model.step(fed, nested)
            chosen = tf.argmax(tf.cast(compared(hidden), tf.float32) + never, axis=-1, output_type=tf.int32)
            # the new ids' row: a turn before the last given id writes nothing (one_hot of a negative index)
            ids += tf.one_hot(turn - given + 1, GREEDY_STEPS, dtype=tf.int32)[None, :] * chosen[:, None]
            return turn + 1, chosen, nested, ids

        _, _, nested, ids = tf.while_loop(
            lambda turn, *_: turn < turns, body,
            (tf.constant(0), tf.zeros([1], tf.int32), state.unpack(flat_state), tf.zeros([1, GREEDY_STEPS], tf.int32)))
        return {"token_ids": ids, "state": state.pack(nested)}

    return greedy


def gumbel_max(logits, ids, noise):
    """The candidate `ids` [1, n] (with their `logits`, −inf for a dropped one) that maximises
    `logit − log(−log(noise[id]))`: a draw from `softmax(logits)` given `noise` [1, vocabulary],
    uniform in (0, 1), one number per id (so an id's draw reads its own number, whichever
    candidates there are)."""
    gumbel = -tf.math.log(-tf.math.log(tf.gather(noise, ids, batch_dims=1)))
    return tf.gather(ids, tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32), batch_dims=1)


def sample(vocabulary, log_probs, noise, temperature, top_k, top_p):
    """The `sample` signature's draw (the module docstring): `gumbel_max` over
    `zoo.models.samplers.candidates`, with top-p where `top_p` < 1, else with top-k where
    `top_k` < `vocabulary`, else over every id, as `lm.generate`'s top-p, top-k and random
    samplers call it (top-p's filter at p = 1 could drop ids whose mass rounds away; a top-k of
    the whole vocabulary would sort it for nothing)."""
    t, k, p = temperature[0], top_k[0], top_p[0]

    def drawn(*limits):
        return lambda: gumbel_max(*candidates(log_probs, t, *limits), noise)

    return tf.cond(p < 1.0, drawn(k, p), lambda: tf.cond(k < vocabulary, drawn(k), drawn()))


def convert(model: "zoo.LanguageModel", quantize: str | None = None) -> bytes:
    """The flatbuffer of `model`'s `prefill`, `decode` and `sample` signatures (the module docstring), LiteRT
    built-in ops only; `quantize="int8"`: the converter's dynamic-range int8 weights.

    Returns:
        The flatbuffer's bytes.

    Example:

    >>> import zoo
    >>> from zoo.export.litert import convert
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    >>> flatbuffer = convert(lm)
    >>> flatbuffer[4:8]
    b'TFL3'
    """
    state = FlatState(model)
    names = list(SIGNATURES)
    tied_int8 = quantize == "int8" and getattr(model, "tie_embeddings", False)
    if tied_int8:
        # a tied model's int8 file leaves `greedy` out: its loop's body reads the table as a
        # dequantized input, which keeps the converter's second int8 copy (share_tied_table cannot
        # reach it); zoo_litert then decodes greedily a token a call
        names.remove("greedy")
    flatbuffer = _converted(model, state, quantize, names)
    if quantize == "int8" and "greedy" in names:
        # Each subgraph that reads an int8 matrix holds its own copy of the scales and zero points
        # (a 10,002-row output layer's: 120 KB), and the greedy loop adds such subgraphs: where that
        # makes the file more than INT8_SHARE of float32's (lstmp-ptb's: 32%), it goes without greedy.
        limit = INT8_SHARE * 4 * stored_weights(model)  # float32's size, to about 1% (its structure)
        if len(flatbuffer) > 0.97 * limit:  # near the line, the float32 file itself decides
            limit = INT8_SHARE * len(_converted(model, state, None, names))
        if len(flatbuffer) > limit:
            flatbuffer = _converted(model, state, quantize, [name for name in names if name != "greedy"])
    if tied_int8:
        flatbuffer = share_tied_table(flatbuffer)  # the converter's second int8 copy of the tied table
    return flatbuffer


def _converted(model, state, quantize, names):
    """The flatbuffer of the signatures `names` of `_functions`."""
    saved = tempfile.mkdtemp(prefix="zoo-litert-")
    try:
        # The converter reads several signatures from a SavedModel and freezes its variables itself,
        # each stored once for all signatures (freezing each function first copied every weight into
        # each: gcnn-14 then passed 17 GB). The module tracks the variables (the functions capture
        # them). experimental_custom_gradients=False: the MoE dispatch's gradient is not saved.
        with saved_variables(model) as variables:  # weight-normalised kernels folded, as the SavedModel's
            root = tf.Module()
            root.variables_ = list(variables)
            functions = {name: tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()
                         for name, (fn, specs) in _functions(model, state).items() if name in names}
            tf.saved_model.save(root, saved, signatures=functions,
                                options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
        converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=list(functions))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return converter.convert()
    finally:
        shutil.rmtree(saved, ignore_errors=True)


def flatbuffer_contents(flatbuffer: bytes) -> dict:
    """What a flatbuffer holds: `{"ops": [built-in op names, and "CUSTOM:<name>" for any other],
    "signatures": {name: {"inputs": {name: {"shape", "dtype"}}, "outputs": {…}}}}`, read from the
    file itself (a dynamic axis's size is −1).

    Returns:
        The dict above.

    Example:

    >>> import zoo
    >>> from zoo.export.litert import convert, flatbuffer_contents
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    >>> contents = flatbuffer_contents(convert(lm))
    >>> contents["signatures"]["decode"]["inputs"]
    {'state': {'shape': [1, 16], 'dtype': 'float32'}, 'token_ids': {'shape': [1], 'dtype': 'int32'}}
    >>> "FULLY_CONNECTED" in contents["ops"]
    True
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flatbuffer))
    op_names = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    type_names = {value: name.lower() for name, value in vars(schema.TensorType).items() if not name.startswith("_")}
    ops = set()
    for code in model.operatorCodes:
        builtin = op_names[max(code.builtinCode, code.deprecatedBuiltinCode)]
        ops.add(f"CUSTOM:{code.customCode.decode()}" if builtin == "CUSTOM" else builtin)

    def tensors(subgraph, maps):
        out = {}
        for item in maps:
            tensor = subgraph.tensors[item.tensorIndex]
            shape = tensor.shapeSignature if tensor.shapeSignature is not None else tensor.shape
            out[item.name.decode()] = {"shape": [int(d) for d in shape], "dtype": type_names[tensor.type]}
        return out

    signatures = {}
    for signature in model.signatureDefs:
        subgraph = model.subgraphs[signature.subgraphIndex]
        signatures[signature.signatureKey.decode()] = {"inputs": tensors(subgraph, signature.inputs),
                                                       "outputs": tensors(subgraph, signature.outputs)}
    return {"ops": sorted(ops), "signatures": signatures}


def stored_weights(model: "zoo.LanguageModel") -> int:
    """How many weights a LiteRT export of `model` stores: every parameter once (a GCNN's `decode`
    multiplies by each conv kernel as one matrix, whose bytes are `prefill`'s convolution filter's,
    and the converter stores equal constants once).

    Returns:
        The count, which times 4 bytes (float32) or 1 (int8) estimates the file's size.

    Example:

    >>> import zoo
    >>> from zoo.export.litert import stored_weights
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    >>> stored_weights(lm) == lm.count_params()
    True
    """
    return int(model.count_params())


def _check(model, path, quantize):
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"Unknown quantize {quantize!r} for a LiteRT export: give None (float32) or 'int8' "
                          "(the converter's int8 weights with a scale per output channel).")
    if os.path.lexists(path):
        raise ExportError(f"{os.path.abspath(path)} already exists and is never changed: give a new path for the "
                          "LiteRT export.")
    if getattr(model, "quantization", None) is not None:
        raise ExportError(f"This model's weights are already {model.quantization} (model.quantize), which LiteRT "
                          "would compute in float32: export the float32 model with quantize='int8' instead.")
    check_tokenizer(model)
    weights = stored_weights(model)
    estimate = weights * BYTES_PER_WEIGHT[quantize]
    if estimate >= FLATBUFFER_LIMIT:
        hint = ("export it with quantize='int8' (a byte a weight)" if quantize is None else
                "even at a byte a weight it does not fit")
        raise ExportError(f"The model's {weights:,} stored weights would make a "
                          f"{'float32' if quantize is None else quantize} flatbuffer of about {estimate / 2**30:.1f} "
                          f"GiB, past LiteRT's {FLATBUFFER_LIMIT / 2**30:.0f} GiB limit: {hint}.")


def describe(model: "zoo.LanguageModel", flatbuffer: bytes, quantize: str | None, state: FlatState,
             seconds: float) -> dict:
    """What `zoo_litert.json` says of an export (the module docstring).

    Returns:
        The dict written as JSON.
    """
    import zoo

    tokenizer = model.tokenizer
    contents = flatbuffer_contents(flatbuffer)
    return {
        "format": "litert",
        "zoo_version": zoo.__version__,
        "tensorflow_version": tf.__version__,
        "file": MODEL_FILE,
        "bytes": len(flatbuffer),
        "family": type(model).__name__,
        "config": model.get_config(),
        "vocabulary_size": int(model.vocabulary_size),
        "parameters": int(model.count_params()),
        "stored_weights": stored_weights(model),
        "tokenizer": tokenizer.kind,
        "tokenizer_files": list(tokenizer.files),
        **tokenizer.export_notes(),
        "special_ids": {"<pad>": int(tokenizer.pad_id), "<s>": int(tokenizer.bos_id), "</s>": int(tokenizer.eos_id),
                        "<unk>": int(tokenizer.unk_id)},
        "never_emitted": [int(i) for i in generation.never_emitted(model)],  # as lm.generate: never written
        "sampling": {"signature": "sample", "rule": "zoo.models.samplers.candidates",
                     "draw": "Gumbel-max on the noise input: uniform in (0, 1), one number per id",
                     "no_top_k": "top_k >= vocabulary_size", "no_top_p": "top_p >= 1"},
        "quantization": None if quantize is None else {
            "mode": quantize,
            "method": "the converter's dynamic-range quantization (tf.lite.Optimize.DEFAULT): weight matrices "
                      "int8 with a float32 scale per output channel, activations quantized on the fly"},
        "signatures": contents["signatures"],
        "state": {"dtype": "float32", "size": state.size, "initial": "zeros", "layout": state.layout},
        "ops": contents["ops"],
        "conversion_seconds": round(seconds, 2),
    }


def export_litert(lm: "zoo.LanguageModel", path: str | os.PathLike, quantize: str | None = None) -> str:
    """Write `lm` as a LiteRT export: the directory `path`, holding `model.tflite` (signatures
    `prefill`, `decode` and `sample`, batch 1), the tokenizer's files and `zoo_litert.json` (what is
    inside). The module docstring gives the signatures and the state's layout.

    Args:
        lm: a float32 `LanguageModel` with a tokenizer (GCNN, LSTM/LSTMP/RNN or LSTM–MoE–LSTM).
        path: the directory to write; it must not exist (an existing file or directory is never
            changed). Its parent directories are made.
        quantize: None (float32 weights) or "int8": the converter's dynamic-range quantization,
            weights int8 with a scale per output channel (not `lm.quantize`'s, which LiteRT would
            compute in float32; the module docstring says why).

    Returns:
        The directory written, as an absolute path.

    Raises:
        ExportError: (a `ValueError`) in one sentence, nothing written: an unknown `quantize`, an
            existing `path`, a model without a tokenizer or already quantized, a flatbuffer that
            would pass LiteRT's 2 GiB limit (estimated before converting: `stored_weights` times
            the bytes a weight), or a conversion that failed.

    Example:

    >>> import os, tempfile, zoo
    >>> from zoo.export import export_litert
    >>> tokenizer = zoo.data.WordTokenizer.build(["the cat sat"])
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=len(tokenizer), embedding_dim=8, blocks=[[[3, 8]]])
    >>> lm.tokenizer = tokenizer
    >>> path = export_litert(lm, os.path.join(tempfile.mkdtemp(), "gcnn"))
    >>> sorted(os.listdir(path))
    ['model.tflite', 'vocabulary.txt', 'zoo_litert.json']
    """
    path = os.path.abspath(os.fspath(path))
    _check(lm, path, quantize)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise ExportError(f"Cannot create the directory {parent}: {reason(e)}; nothing was written.") from e
    tmp = None
    try:
        start = time.perf_counter()
        state = FlatState(lm)
        try:
            flatbuffer = convert(lm, quantize)
        except Exception as e:  # the converter's errors come as several kinds, with pages of MLIR
            raise ExportError(f"The LiteRT converter could not convert {type(lm).__name__} with LiteRT's built-in "
                              f"ops: {reason(str(e).strip().splitlines()[0] if str(e).strip() else e)}.") from e
        seconds = time.perf_counter() - start
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
        with open(os.path.join(tmp, MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        lm.tokenizer.save(tmp)
        with open(os.path.join(tmp, METADATA_FILE), "w") as f:
            json.dump(describe(lm, flatbuffer, quantize, state, seconds), f, indent=1)
        if os.path.lexists(path):  # another export took the path meanwhile
            raise ExportError(f"{path} appeared during the export and was left untouched; nothing was written.")
        os.rename(tmp, path)
    except BaseException as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise ExportError(f"Could not write the LiteRT export {path}: {reason(e)}; the partial export was "
                              "removed.") from e
        raise
    return path


__all__ = ["export_litert", "convert", "flatbuffer_contents", "stored_weights"]
