"""`zoo.export.warmup`: the warmup records parsed with tensorflow-serving-api's own protos and
replayed through the SavedModel in a fresh process, and the batching file beside the versions."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from zoo.export import export_saved_model, warmup

prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")
SIGNATURES = ["serving_default", "score_ids", "next_token", "decode_step", "generate"]


def parsed_records(export):
    path = os.path.join(export, warmup.WARMUP_FILE)
    logs = []
    for record in tf.data.TFRecordDataset(path):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        logs.append(log)
    return logs


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model):
    from zoo.data import WordTokenizer

    tokenizer = WordTokenizer.build(["the cat sat on the mat", "a dog"])
    model = tiny_model("gcnn", tokenizer=tokenizer)
    base = tmp_path_factory.mktemp("exports")
    return model, str(base), export_saved_model(model, str(base), "tiny", batch_sizes=[3, 1])


@pytest.mark.ci  # the SavedModel export of the `exported` fixture (10 s)
def test_one_request_per_signature_and_batch_size_in_the_real_protos(exported):
    model, _, export = exported
    logs = parsed_records(export)
    seen = [(log.predict_log.request.model_spec.signature_name,
             tf.make_ndarray(log.predict_log.request.inputs[
                 "text" if "text" in log.predict_log.request.inputs else "token_ids"]).shape[0]) for log in logs]
    assert sorted(seen) == sorted((s, b) for s in SIGNATURES for b in (1, 3))
    assert {log.predict_log.request.model_spec.name for log in logs} == {"tiny"}
    metadata = json.load(open(os.path.join(export, "assets.extra", "zoo_export.json")))
    assert metadata["warmup"] == {"file": warmup.WARMUP_FILE, "batch_sizes": [1, 3], "records": 10,
                                  "batching_file": warmup.BATCHING_FILE}
    for log in logs:  # every input of the signature, with its dtype
        request = log.predict_log.request
        described = metadata["signatures"][request.model_spec.signature_name]["inputs"]
        assert sorted(request.inputs) == sorted(described)
        for name, tensor in request.inputs.items():
            assert tf.dtypes.as_dtype(tensor.dtype).name == described[name]["dtype"]


@pytest.mark.ci  # the SavedModel export of the `exported` fixture (10 s)
def test_the_batching_file_allows_the_warmups_sizes(exported, tmp_path):
    _, _, export = exported
    batching = os.path.join(export, warmup.BATCHING_FILE)
    assert warmup.read_batch_sizes(batching) == (1, 3)
    assert "max_batch_size { value: 3 }" in open(batching).read()
    # a server's own file chooses the warmup's sizes; other sizes as well are refused in one sentence
    assert warmup.sizes_of(batching) == (1, 3) and warmup.sizes_of(batching, [3, 1]) == (1, 3)
    with pytest.raises(ValueError, match=r"^The batching file .*batching_parameters.txt allows batch sizes \[1, 3\], "
                                         r"but the warmup was asked for \[1, 8\]; give one of the two\.$"):
        warmup.sizes_of(batching, [1, 8])
    empty = tmp_path / "batching.txt"
    empty.write_text("max_batch_size { value: 8 }\n")
    with pytest.raises(ValueError, match=r"has no allowed_batch_sizes"):
        warmup.sizes_of(str(empty))
    with pytest.raises(ValueError, match=r"batch_sizes must be whole numbers >= 1 .*got \[0, 2\]"):
        warmup.check_batch_sizes([0, 2])


@pytest.mark.ci  # the SavedModel export of the `exported` fixture (10 s)
def test_the_command_line_refuses_disagreeing_sizes_before_writing(exported, tmp_path, capsys):
    from zoo.tools.cli import main

    _, _, export = exported
    out = tmp_path / "exports"
    assert main(["export", str(tmp_path / "no-preset"), "--base", str(out), "--batch-sizes", "1,8",
                 "--batching-file", os.path.join(export, warmup.BATCHING_FILE)]) == 2
    assert "allows batch sizes [1, 3], but the warmup was asked for [1, 8]" in capsys.readouterr().err
    assert not out.exists()


def test_the_wire_format_round_trips_through_the_real_protos():
    inputs = {"text": np.array([b"a b", "\u00e9t\u00e9".encode()], dtype=object), "k": np.asarray(3, np.int32),
              "state_block_0_conv_0": np.zeros([2, 2, 8], np.float32)}
    log = prediction_log_pb2.PredictionLog()
    log.ParseFromString(warmup.prediction_log("m" * 200, "next_token", inputs))  # a name > 127 bytes: 2-byte length
    request = log.predict_log.request
    assert (request.model_spec.name, request.model_spec.signature_name) == ("m" * 200, "next_token")
    for name, value in inputs.items():
        np.testing.assert_array_equal(tf.make_ndarray(request.inputs[name]), value)


def test_a_repeated_value_is_written_once_and_read_back_whole_by_tensorflows_cpp_parser():
    # TF Serving turns a request's TensorProto into a Tensor with Tensor::FromProto, which
    # tf.raw_ops.ParseTensor runs too.
    cases = {"zeros": np.zeros([32, 2, 600], np.float32), "ones": np.ones([32], np.int32),
             "text": np.array([b"the"] * 32, dtype=object), "mixed": np.arange(6, dtype=np.float32).reshape(2, 3),
             "scalar": np.asarray(7, np.int32), "empty": np.zeros([0, 4], np.float32)}
    for name, value in cases.items():
        proto = warmup.tensor_proto(value)
        dtype = tf.string if value.dtype == object else tf.as_dtype(value.dtype)
        parsed = tf.raw_ops.ParseTensor(serialized=proto.SerializeToString(), out_type=dtype).numpy()
        np.testing.assert_array_equal(parsed, value, err_msg=name)
        np.testing.assert_array_equal(tf.make_ndarray(proto), value, err_msg=name)
    assert warmup.tensor_proto(cases["zeros"]).ByteSize() < 32
    assert warmup.tensor_proto(cases["text"]).ByteSize() < 32
    assert warmup.tensor_proto(cases["mixed"]).ByteSize() > 6 * 4


REPLAY = """
import sys, tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2
export = sys.argv[1]
loaded = tf.saved_model.load(export)
answered = 0
for record in tf.data.TFRecordDataset(export + "/assets.extra/tf_serving_warmup_requests"):
    log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
    request = log.predict_log.request
    out = loaded.signatures[request.model_spec.signature_name](
        **{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})
    batch = tf.make_ndarray(request.inputs["text" if "text" in request.inputs else "token_ids"]).shape[0]
    answered += all(v.shape[0] == batch for v in out.values())  # every output, one row per request row
print("answered", answered, "modules", sorted(m for m in sys.modules if m.split(".")[0] == "zoo"))
"""


@pytest.mark.ci
def test_every_record_replays_through_the_savedmodel_in_a_fresh_process(exported):
    _, _, export = exported
    out = subprocess.run([sys.executable, "-c", REPLAY, export], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "answered 10 modules []"
