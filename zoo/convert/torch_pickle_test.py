import argparse
import collections
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

from zoo.convert import torch_pickle
from zoo.convert.torch_pickle import CheckpointError

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")


_RENAMES = {}  # placeholder GLOBAL opcode -> the GLOBAL torch's pickler writes


def _global(module, name):
    """A placeholder class of this module that pickles as a GLOBAL; `_dumps` renames it to
    `module.name`, so that these tests write torch's formats without torch (and without putting
    anything into other modules)."""
    placeholder = f"G_{len(_RENAMES)}"
    cls = type(placeholder, (), {"__module__": __name__, "__qualname__": placeholder})
    globals()[placeholder] = cls
    _RENAMES[f"c{__name__}\n{placeholder}\n".encode()] = f"c{module}\n{name}\n".encode()
    return cls


class _Pickler(pickle.Pickler):
    def __init__(self, file, pid):
        super().__init__(file, protocol=2)
        self.pid = pid

    def persistent_id(self, obj):
        return self.pid.get(id(obj))


class _Reduce:
    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


class _Storage:
    def __init__(self, key, array, type_name="FloatStorage"):
        self.key, self.array, self.type_name = key, array, type_name


def _tensor(storage, offset, size, stride):
    return _Reduce(_global("torch._utils", "_rebuild_tensor_v2"),
                   (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict()))


def _dumps(obj, storages):
    buf = io.BytesIO()
    pid = {id(s): ("storage", _global("torch", s.type_name), s.key, "cpu", s.array.size) for s in storages}
    _Pickler(buf, pid).dump(obj)
    data = buf.getvalue()
    for placeholder, real in _RENAMES.items():
        data = data.replace(placeholder, real)
    return data


def write_legacy(path, obj, storages):
    with open(path, "wb") as f:
        for header in (torch_pickle.LEGACY_MAGIC, torch_pickle.LEGACY_PROTOCOL,
                       {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(header, f, protocol=2)
        f.write(_dumps(obj, storages))
        pickle.dump([s.key for s in storages], f, protocol=2)
        for s in storages:
            f.write(struct.pack("<q", s.array.size) + s.array.astype(s.array.dtype.newbyteorder("<")).tobytes())


def write_zip(path, obj, storages):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", _dumps(obj, storages))
        z.writestr("archive/byteorder", "little")
        for s in storages:
            z.writestr(f"archive/data/{s.key}", s.array.tobytes())
        z.writestr("archive/version", "3\n")


def _checkpoint():
    """A small fairseq-like checkpoint: args, an OrderedDict state dict with a transposed view
    and an offset view of one storage, a long tensor, a numpy scalar in extra_state."""
    weights = _Storage("0", np.arange(12, dtype=np.float32))
    steps = _Storage("1", np.array([7, -3], dtype=np.int64), "LongStorage")
    args = argparse.Namespace(arch="fconv_lm", decoder_layers="[(8, 4)] * 2")
    model = collections.OrderedDict([
        ("w", _tensor(weights, 0, (3, 4), (4, 1))),
        ("wt", _tensor(weights, 0, (4, 3), (1, 4))),
        ("tail", _tensor(weights, 10, (2,), (1,))),
        ("steps", _tensor(steps, 0, (2,), (1,))),
    ])
    best = _Reduce(_global("numpy.core.multiarray", "scalar"),
                   (np.dtype("float64"), struct.pack("<d", 4.25)))
    return {"args": args, "model": model, "extra_state": {"best": best}}, [weights, steps]


def _check(loaded):
    assert loaded["args"].arch == "fconv_lm" and loaded["args"].decoder_layers == "[(8, 4)] * 2"
    model = loaded["model"]
    assert isinstance(model, collections.OrderedDict) and list(model) == ["w", "wt", "tail", "steps"]
    np.testing.assert_array_equal(model["w"], np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(model["wt"], np.arange(12, dtype=np.float32).reshape(3, 4).T)
    np.testing.assert_array_equal(model["tail"], [10.0, 11.0])
    assert model["steps"].dtype == np.int64 and model["steps"].tolist() == [7, -3]
    assert loaded["extra_state"]["best"] == 4.25


@pytest.mark.parametrize("writer", [write_legacy, write_zip])
def test_reads_both_formats(tmp_path, writer):
    obj, storages = _checkpoint()
    path = tmp_path / "checkpoint.pt"
    writer(path, obj, storages)
    _check(torch_pickle.load(path))


@pytest.mark.parametrize("writer", [write_legacy, write_zip])
def test_a_global_outside_the_allowed_set_is_refused_and_nothing_runs(tmp_path, writer):
    marker = tmp_path / "ran"
    obj, storages = _checkpoint()
    obj["extra_state"]["payload"] = _Reduce(os.system, (f"touch {marker}",))
    path = tmp_path / "checkpoint.pt"
    writer(path, obj, storages)
    with pytest.raises(CheckpointError, match=r"needs the global (posix|os)\.system, which is not one"):
        torch_pickle.load(path)
    assert not marker.exists()


def test_state_set_on_an_allowed_object_other_than_a_namespace_is_refused(tmp_path):
    obj, storages = _checkpoint()
    # BUILD on an OrderedDict may set only torch's `_metadata`; any other attribute is refused
    payload = pickle.dumps(collections.OrderedDict(), protocol=2)[:-1]  # without STOP
    data = payload + pickle.dumps({"__class__": 1}, protocol=2)[2:-1] + pickle.BUILD + pickle.STOP
    with zipfile.ZipFile(tmp_path / "c.pt", "w") as z:
        z.writestr("archive/data.pkl", data)
    with pytest.raises(CheckpointError, match="sets the state of a OrderedDict; only an argparse.Namespace"):
        torch_pickle.load(tmp_path / "c.pt")


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("the 100\nof 50\n")
    with pytest.raises(CheckpointError, match="is not a torch checkpoint: it is neither a zip archive nor a legacy"):
        torch_pickle.load(path)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(CheckpointError, match="is a zip archive but not a torch checkpoint"):
        torch_pickle.load(other)


@pytest.mark.parametrize("writer", [write_legacy, write_zip])
@pytest.mark.parametrize("keep", [0.3, 0.7, 0.98])
def test_a_truncated_checkpoint_is_refused(tmp_path, writer, keep):
    obj, storages = _checkpoint()
    path = tmp_path / "checkpoint.pt"
    writer(path, obj, storages)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match="truncated"):
        torch_pickle.load(path)


def test_a_tensor_reading_past_its_storage_is_refused(tmp_path):
    weights = _Storage("0", np.arange(4, dtype=np.float32))
    write_zip(tmp_path / "c.pt", {"w": _tensor(weights, 2, (3,), (1,))}, [weights])
    with pytest.raises(CheckpointError, match=r"shape \[3\] reads past its storage of 4 elements"):
        torch_pickle.load(tmp_path / "c.pt")


@pytest.mark.parametrize("name", ["tensors_legacy.pt", "tensors_zip.pt"])
def test_files_written_by_torch(name):
    """Files torch itself wrote (tools/convert/make_fairseq_goldens.py): every dtype, views with
    offsets and strides, against the values it recorded."""
    path = os.path.join(TESTDATA, name)
    if not os.path.exists(path):
        pytest.skip("the torch-written test data is not generated yet")
    loaded = torch_pickle.load(path)
    expected = np.load(os.path.join(TESTDATA, "tensors.npz"))
    assert sorted(loaded) == sorted(expected.files)
    for key in expected.files:
        assert loaded[key].dtype == expected[key].dtype, key
        np.testing.assert_array_equal(loaded[key], expected[key], err_msg=key)
