"""TF Serving's warmup records and batching file for an export.

TF Serving replays `assets.extra/tf_serving_warmup_requests` (a TFRecord file of `PredictionLog`
protos) when it loads a version, before the version takes traffic, so that the first real
request does not pay for what the first call of each signature sets up (the lookup tables'
initialisation, Grappler's rewrite of each function, the allocator's first buffers). An export
holds one `PredictRequest` per signature for each batch size a batching server may form: the
`allowed_batch_sizes` of the example batching file it holds beside them
(`assets.extra/batching_parameters.txt`, for `--enable_batching --batching_parameters_file`);
`zoo export --batching-file FILE` takes the sizes from a server's own file instead.

The records are written with TensorFlow alone: each `TensorProto` is TensorFlow's own
(`tf.make_tensor_proto`; an input of one repeated value is written once with its shape), and the
few enclosing messages of tensorflow_serving/apis (`PredictionLog.predict_log` = 6 →
`PredictLog.request` = 1 → `PredictRequest.model_spec` = 1 and its `inputs` map = 2 →
`ModelSpec.name` = 1, `signature_name` = 3) are encoded field by field in protobuf's wire format;
export/warmup_test.py parses them with tensorflow-serving-api's protos.
"""

import os
import re

import numpy as np
import tensorflow as tf

BATCH_SIZES = (1, 2, 4, 8, 16, 32)
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
BATCHING_FILE = os.path.join("assets.extra", "batching_parameters.txt")
WARMUP_TEXT = "the"  # any text: a warmup request's answer is thrown away
WARMUP_NEW_TOKENS = 2


def check_batch_sizes(batch_sizes):
    """`batch_sizes` as a sorted tuple of distinct whole numbers >= 1, or one sentence."""
    try:
        sizes = tuple(sorted({int(b) for b in batch_sizes}))
        if not sizes or sizes[0] < 1 or any(int(b) != b or isinstance(b, bool) for b in batch_sizes):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"batch_sizes must be whole numbers >= 1 (a batching server's allowed_batch_sizes), got "
                         f"{batch_sizes!r}.") from None
    return sizes


# ---- the requests ---------------------------------------------------------------------------
def example_inputs(input_specs, batch, defaults=None):
    """One request's inputs for a signature of `input_specs` (`{name: (dtype, shape)}`, shape with
    -1 for the batch and time axes, None for a tensor of any shape): `batch` rows."""
    defaults = dict(defaults or {})
    if "max_new_tokens" in defaults:
        defaults["max_new_tokens"] = min(WARMUP_NEW_TOKENS, defaults["max_new_tokens"])
    inputs = {}
    for name, (dtype, shape) in input_specs.items():
        if name in defaults:
            inputs[name] = np.asarray(defaults[name], dtype=dtype)
        elif dtype == "string":
            inputs[name] = np.array([WARMUP_TEXT.encode()] * batch, dtype=object)
        elif shape is None:  # next_token's k: one value for every row
            inputs[name] = np.asarray(1, dtype=dtype)
        elif name == "token_ids" and len(shape) == 2:  # score_ids: <s> and one token per row
            inputs[name] = np.tile(np.array([[1, 3]], dtype=dtype), (batch, 1))
        elif name == "lengths":
            inputs[name] = np.full([batch], 2, dtype=dtype)
        elif name == "token_ids":  # decode_step: one <s> per row
            inputs[name] = np.ones([batch], dtype=dtype)
        else:  # decode_step's state: its initial (zero) value
            inputs[name] = np.zeros([batch if d == -1 else d for d in shape], dtype=dtype)
    return inputs


def requests(metadata, batch_sizes):
    """`[(signature name, batch size, inputs)]` for every signature of an export's metadata
    (`zoo_export.json`) and every batch size."""
    out = []
    for signature, described in metadata["signatures"].items():
        specs = {name: (spec["dtype"], spec["shape"]) for name, spec in described["inputs"].items()}
        for batch in batch_sizes:
            out.append((signature, batch, example_inputs(specs, batch, described.get("defaults"))))
    return out


# ---- protobuf's wire format, for the few tensorflow_serving messages around TensorProtos -----
def _varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (wire type 2): a string, bytes or an embedded message."""
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def tensor_proto(value):
    """`value`'s `TensorProto`. An array of one value repeated is written as that value once with
    the array's shape: TensorFlow's `Tensor::FromProto`, which TF Serving reads requests with,
    fills the rest of the shape with it (as `tf.make_ndarray` does). A decoding state of zeros at
    batch 32 is then a few bytes instead of its whole size."""
    value = np.asarray(value)
    if value.size > 1 and bool(np.all(value == value.flat[0])):
        dtype = tf.string if value.dtype == object else tf.as_dtype(value.dtype)
        return tf.make_tensor_proto(value.flat[0], dtype=dtype, shape=value.shape)
    return tf.make_tensor_proto(value)


def prediction_log(model_name, signature_name, inputs):
    """The serialised `PredictionLog` of a `PredictRequest` for `signature_name` of
    `model_name` with `inputs` (`{name: array}`)."""
    model_spec = _field(1, model_name) + _field(3, signature_name)
    entries = b"".join(_field(2, _field(1, name) + _field(2, tensor_proto(value).SerializeToString()))
                       for name, value in sorted(inputs.items()))
    request = _field(1, model_spec) + entries
    return _field(6, _field(1, request))


def write_warmup(path, metadata, batch_sizes=BATCH_SIZES):
    """Writes `path/assets.extra/tf_serving_warmup_requests` for the export at `path` (whose
    `metadata` is its `zoo_export.json`); returns how many records it holds."""
    records = requests(metadata, batch_sizes)
    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(path, WARMUP_FILE)) as writer:
        for signature, _, inputs in records:
            writer.write(prediction_log(metadata["name"], signature, inputs))
    return len(records)


# ---- the batching file ---------------------------------------------------------------------
def batching_parameters(batch_sizes=BATCH_SIZES):
    """An example `--batching_parameters_file` (a text `BatchingParameters` proto) whose
    `allowed_batch_sizes` are the warmup's; the largest is `max_batch_size`."""
    sizes = check_batch_sizes(batch_sizes)
    lines = [f"max_batch_size {{ value: {sizes[-1]} }}",
             "batch_timeout_micros { value: 2000 }",
             "max_enqueued_batches { value: 100 }",
             "num_batch_threads { value: 2 }",
             *(f"allowed_batch_sizes: {b}" for b in sizes),
             "pad_variable_length_inputs: true"]
    return "\n".join(lines) + "\n"


def read_batch_sizes(path):
    """The `allowed_batch_sizes` of a batching file (a text `BatchingParameters` proto), or one
    sentence when it names none."""
    if not os.path.isfile(path):
        raise ValueError(f"The batching file {path!r} is not a file.")
    with open(path, encoding="utf-8") as f:
        sizes = tuple(int(v) for v in re.findall(r"^\s*allowed_batch_sizes\s*:\s*(\d+)", f.read(), re.M))
    if not sizes:
        raise ValueError(f"The batching file {path} has no allowed_batch_sizes, so the warmup cannot cover the "
                         "batches the server forms; add them (e.g. allowed_batch_sizes: 1 … 32).")
    return sizes


def sizes_of(batching_file=None, batch_sizes=None):
    """The warmup's batch sizes: a server's batching file's `allowed_batch_sizes`, or
    `batch_sizes`, or the default; one sentence when both are given and disagree."""
    if batching_file is None:
        return check_batch_sizes(BATCH_SIZES if batch_sizes is None else batch_sizes)
    found = check_batch_sizes(read_batch_sizes(batching_file))
    if batch_sizes is not None and check_batch_sizes(batch_sizes) != found:
        raise ValueError(f"The batching file {batching_file} allows batch sizes {list(found)}, but the warmup was "
                         f"asked for {list(check_batch_sizes(batch_sizes))}; give one of the two.")
    return found


def write_batching_file(path, batch_sizes):
    """Writes the example batching file into the export at `path`; returns its relative path."""
    with open(os.path.join(path, BATCHING_FILE), "w", encoding="utf-8") as f:
        f.write(batching_parameters(batch_sizes))
    return BATCHING_FILE
