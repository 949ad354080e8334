"""`export_saved_model` (export/saved_model.py), on the word-model exports of export/conftest.py:
the export's metadata (its decode state, max_tokens, tokenizer) and vocabulary asset; versions:
the next one above the highest present, written beside and renamed into place, never
overwritten; a failed write or a read-only directory leaves nothing behind and says so in one
sentence; bad arguments and a model without a vocabulary are refused before anything is written."""

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile

import pytest

import zoo.export as export
import zoo.export.saved_model  # noqa: F401  (export.saved_model, patched below)
from zoo.export.state import StateLayout
from tests.export_checks import MAX_TOKENS

# Every test here needs a whole export first (a session fixture): the capability tier.
pytestmark = pytest.mark.ci


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
    # the vocabulary is in the graph (constants of its lookup tables), not a file beside it
    assert not os.path.exists(os.path.join(exported["moe"][1], "assets", "vocabulary.txt"))
    assert metadata["special_ids"] == {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}


# ---- versions -------------------------------------------------------------------------------
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
    ({"max_tokens": 0}, "max_tokens"), ({"head_blocks": 0}, r"head_blocks must be an integer in \[1, 64\], got 0"),
    ({"head_blocks": 65}, "got 65"), ({"head_blocks": 2.5}, "got 2.5"),
])
def test_bad_arguments_raise_before_writing(exported, tmp_path, kwargs, message):
    model, _ = exported["gcnn"]
    args = {"name": "m", **kwargs}
    with pytest.raises(ValueError, match=message):
        export.export_saved_model(model, str(tmp_path), **args)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("family", ["lstm", "gcnn-tied"])  # a full and a tied output layer
def test_head_blocks_change_the_loop_not_the_text(family, exported, tmp_path):
    """`head_blocks`: generate's output layer as 3 products over blocks of ids (at a few rows):
    each of its two loops for a few rows (the sampled one, and the greedy one that beam search
    decodes beside its beams) holds 2 more products than the default export's one, whose metadata
    says 1, and greedy decoding writes the same texts. (Sampled draws can differ: the blocks' logits may round
    differently in their last bits, docs/serving.md.)"""
    import numpy as np
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    from zoo.export.export_test import GENERATE, PROMPTS

    model, default_path = exported[family]
    path = export.export_saved_model(model, str(tmp_path), family, head_blocks=3)

    def metadata(p):
        with open(os.path.join(p, "assets.extra", "zoo_export.json")) as f:
            return json.load(f)

    def products(p):
        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(p, "saved_model.pb"), "rb") as f:
            saved.ParseFromString(f.read())
        return sum(n.op == "MatMul" for fn in saved.meta_graphs[0].graph_def.library.function for n in fn.node_def)

    assert metadata(path)["head_blocks"] == 3 and metadata(default_path)["head_blocks"] == 1
    assert products(path) == products(default_path) + 2 * 2
    blocked, default = (tf.saved_model.load(p).signatures["generate"] for p in (path, default_path))
    for rows in (PROMPTS, PROMPTS[:1]):
        inputs = {"text": tf.constant(rows), **{k: tf.constant(v, tf.float32 if isinstance(v, float) else tf.int32)
                                                for k, v in GENERATE["greedy"].items()}}
        got, want = blocked(**inputs), default(**inputs)
        for key in want:
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=f"{family} {key}")


def test_a_model_without_vocabulary_is_refused(tiny_model, tmp_path):
    model = tiny_model("lstm")
    with pytest.raises(ValueError, match="no tokenizer to read text with"):
        export.export_saved_model(model, str(tmp_path), "m")


def test_a_weight_normalised_layer_is_saved_as_its_one_folded_kernel(exported):
    """Each weight-normalised conv layer's v and g are saved as the kernel g · v / ‖v‖ they make,
    so that a request does not compute it again; the model itself keeps v and g, still trains,
    and its layers compute the kernel as before once the export is done."""
    import numpy as np
    import tensorflow as tf

    from zoo.layers.gated_conv import GatedConv1D

    model, path = exported["gcnn"]
    convs = [layer for layer in model._flatten_layers() if isinstance(layer, GatedConv1D)]
    assert convs and all(c.weight_norm for c in convs)
    saved = dict(tf.train.list_variables(os.path.join(path, "variables", "variables")))
    saved = {name: shape for name, shape in saved.items() if "model_variables" in name}
    assert len(saved) == len(model.weights) - len(convs)  # v and g of each conv: one kernel
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    values = [reader.get_tensor(name) for name in saved]
    for conv in convs:  # each effective kernel is saved, and no v or g is
        kernel = conv.effective_kernel().numpy()
        assert sum(v.shape == kernel.shape and np.allclose(v, kernel, atol=1e-6) for v in values) >= 1, conv.name
        assert getattr(conv, "_folded_kernel", None) is None  # in process: computed from v and g again
    # the graph computes no weight norm (no square root is left in it)
    from tensorflow.core.protobuf import saved_model_pb2

    graph = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        graph.ParseFromString(f.read())
    ops = {n.op for fn in graph.meta_graphs[0].graph_def.library.function for n in fn.node_def}
    assert "Sqrt" not in ops
