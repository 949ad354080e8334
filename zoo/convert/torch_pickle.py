"""Reading a PyTorch checkpoint without torch and without running anything it holds.

A `torch.save` file is a pickle, and unpickling can call any function the file names. This
reader calls none of the file's choosing: a restricted unpickler resolves only the globals of
`ALLOWED` (what a fairseq checkpoint holds) to stand-ins of its own, and refuses any other name
before anything is called. Tensors come back as numpy arrays.

Both formats `torch.save` writes are read:

- the legacy format (torch < 1.6, and `_use_new_zipfile_serialization=False`; the format of
  fairseq's 2018 checkpoints): five records one after another: the magic number, the protocol
  version and the system info (three small pickles), then the pickled object, whose storages are
  persistent ids, then the pickled list of storage keys, then each storage's raw bytes (an int64
  element count, then the elements) in that order;
- the zip format (torch >= 1.6): an archive `<name>/data.pkl` whose storages are persistent ids
  naming the files `<name>/data/<key>`, with `<name>/byteorder` (torch >= 2.1; little-endian
  before).
"""

import argparse
import collections
import io
import os
import pickle
import struct
import zipfile

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
LEGACY_PROTOCOL = 1001  # torch.serialization.PROTOCOL_VERSION

# torch storage class name -> numpy dtype of its elements (bfloat16 is widened on reading).
STORAGE_DTYPES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


class CheckpointError(ValueError):
    """A file that cannot be read as an allowed checkpoint (the message says why)."""


class _Storage:
    """A storage named by a persistent id: its dtype, key and element count; its bytes come later
    (after the pickle in the legacy format, from the archive in the zip format)."""

    def __init__(self, dtype, key, numel):
        self.dtype, self.key, self.numel = dtype, key, numel
        self.array = None


class _Tensor:
    """A tensor as `_rebuild_tensor_v2` describes it: a strided view of a storage."""

    def __init__(self, storage, offset, size, stride):
        if not isinstance(storage, _Storage):
            raise CheckpointError(f"A tensor's storage must be a persistent storage id, got {type(storage).__name__}.")
        self.storage, self.offset, self.size, self.stride = storage, int(offset), tuple(size), tuple(stride)

    def to_numpy(self):
        data = self.storage.array
        if not self.size:
            return np.array(data[self.offset])
        if any(n == 0 for n in self.size):
            return np.zeros(self.size, data.dtype)
        last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride))
        if self.offset < 0 or min(self.stride) < 0 or last >= data.size:
            raise CheckpointError(
                f"A tensor of shape {list(self.size)} reads past its storage of {data.size} elements: "
                "the checkpoint is damaged.")
        view = np.lib.stride_tricks.as_strided(
            data[self.offset:], shape=self.size, strides=[s * data.itemsize for s in self.stride], writeable=False)
        return np.array(view)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    if backward_hooks:
        raise CheckpointError("A tensor in the checkpoint carries backward hooks; a saved state dict has none.")
    return _Tensor(storage, storage_offset, size, stride)


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _Tensor(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


def _numpy_scalar(dtype, data):
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes):
        raise CheckpointError(f"A numpy scalar must be a plain dtype and bytes, got {dtype!r}.")
    return np.frombuffer(data, dtype)[0]


def _numpy_dtype(name, align=False, copy=False):
    dtype = np.dtype(name)
    if dtype.hasobject:
        raise CheckpointError(f"A numpy dtype of Python objects ({name!r}) is not allowed in a checkpoint.")
    return dtype


def _codecs_encode(text, encoding="utf-8"):
    # Protocol-2 pickles write bytes objects (a numpy scalar's data) as `_codecs.encode(text, "latin1")`.
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise CheckpointError(f"_codecs.encode is allowed only to write bytes as latin1, got {encoding!r}.")
    return text.encode("latin1")


# The globals a fairseq checkpoint holds (0.5 to 0.12; the model, its args and its training
# state), each resolved to a stand-in of ours; the file can name nothing else.
ALLOWED = {
    # state dicts and fairseq's meters are OrderedDicts
    ("collections", "OrderedDict"): collections.OrderedDict,
    # tensors: torch >= 0.4, torch < 0.4, and `keep_vars` parameters
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    # fairseq < 0.10 saves its command line as `args`, an argparse.Namespace (set by BUILD from a
    # dict of plain values; nothing of the class runs beyond object.__new__)
    ("argparse", "Namespace"): argparse.Namespace,
    # fairseq's meters and best-loss records leave numpy scalars in `extra_state` (a float64
    # rebuilt from its dtype and bytes; protocol 2 writes those bytes through _codecs.encode)
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
    ("numpy", "dtype"): _numpy_dtype,
    ("_codecs", "encode"): _codecs_encode,
}
# Storage types name a dtype (persistent ids hold them, as does a tensor saved on a GPU).
for _name in STORAGE_DTYPES:
    ALLOWED[("torch", _name)] = _name
    ALLOWED[("torch.cuda", _name)] = _name
# fairseq 0.10+ saves `cfg` as plain containers (OmegaConf.to_container), so omegaconf's classes
# are not needed and not allowed.


class _RestrictedUnpickler(pickle._Unpickler):
    """The pure-Python unpickler with `find_class` limited to `ALLOWED` and BUILD limited to
    setting the attributes of an `argparse.Namespace`, the `_metadata` of a state dict and the byte
    order of a numpy dtype (so no `__setstate__` of any object runs)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, storages):
        super().__init__(file)
        self.storages = storages  # key -> _Storage, filled as persistent ids are read

    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise CheckpointError(
                f"The checkpoint needs the global {module}.{name}, which is not one a fairseq checkpoint "
                f"holds; it was refused and nothing in the file was run (allowed: "
                f"{', '.join(sorted({m + '.' + n for m, n in ALLOWED}))}).")
        return ALLOWED[(module, name)]

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise CheckpointError(f"Unknown persistent id {pid!r}: only torch storages are allowed.")
        storage_type, key, _location, numel = pid[1:5]
        if storage_type not in STORAGE_DTYPES:
            raise CheckpointError(f"Unknown storage type {storage_type!r} (known: {', '.join(STORAGE_DTYPES)}).")
        view = pid[5] if len(pid) > 5 else None
        key = str(key)
        if key not in self.storages:
            self.storages[key] = _Storage(STORAGE_DTYPES[storage_type], key, int(numel))
        if view is not None:  # torch < 1.0: a storage viewing part of another one
            view_key, offset, view_size = view
            if view_key not in self.storages:
                self.storages[view_key] = _Storage(STORAGE_DTYPES[storage_type], view_key, int(view_size))
                self.storages[view_key].view_of = (key, int(offset))
            return self.storages[view_key]
        return self.storages[key]

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, np.dtype) and isinstance(state, tuple) and len(state) >= 4 and state[2:4] == (None, None):
            # a plain numpy dtype's state: only its byte order is taken (no subarray, no fields)
            if state[1] not in ("<", ">", "=", "|"):
                raise CheckpointError(f"A numpy dtype's byte order must be one of <, >, =, |; got {state[1]!r}.")
            self.stack[-1] = inst.newbyteorder(state[1]) if state[1] in "<>" else inst
            return
        if type(inst) is collections.OrderedDict and isinstance(state, dict) and set(state) <= {"_metadata"}:
            # torch's state_dict() keeps each module's version in the OrderedDict's `_metadata`
            inst._metadata = state.get("_metadata")
            return
        if type(inst) is not argparse.Namespace or not isinstance(state, dict):
            raise CheckpointError(
                f"The checkpoint sets the state of a {type(inst).__name__}; only an argparse.Namespace "
                "may be given attributes.")
        for k, v in state.items():
            setattr(inst, str(k), v)

    dispatch[pickle.BUILD[0]] = load_build


def _unpickle(stream, storages, path, what):
    """One pickle from `stream` (a file object); a pickle cut short says the file is truncated."""
    try:
        return _RestrictedUnpickler(stream, storages).load()
    except CheckpointError:
        raise
    except Exception as e:  # a malformed pickle: cut short, or not one this reader can read
        at_end = not stream.read(1)
        if isinstance(e, EOFError) or at_end:
            raise CheckpointError(f"{path} is truncated: its {what} ends before the pickle does.") from e
        raise CheckpointError(f"{path}'s {what} is not a readable pickle ({type(e).__name__}: {e}).") from e


def _dtype_array(raw, dtype, byteorder="little"):
    if dtype == "bfloat16":  # the upper half of a float32
        bits = np.frombuffer(raw, "<u2" if byteorder == "little" else ">u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    dt = np.dtype(dtype).newbyteorder("<" if byteorder == "little" else ">")
    return np.frombuffer(raw, dt).astype(np.dtype(dtype).newbyteorder("="))


def _itemsize(dtype):
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def _materialise(obj):
    """Every `_Tensor` inside `obj` (dicts, lists, tuples, Namespaces) replaced by its array."""
    if isinstance(obj, _Tensor):
        return obj.to_numpy()
    if isinstance(obj, dict):
        for k in list(obj):
            obj[k] = _materialise(obj[k])
        return obj
    if isinstance(obj, list):
        return [_materialise(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_materialise(v) for v in obj)
    if isinstance(obj, argparse.Namespace):
        for k, v in vars(obj).items():
            setattr(obj, k, _materialise(v))
        return obj
    if isinstance(obj, _Storage):
        return obj.array
    return obj


def _resolve_views(storages):
    for s in storages.values():
        if getattr(s, "view_of", None):
            base, offset = s.view_of
            s.array = storages[base].array[offset: offset + s.numel]


def _load_zip(path):
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{path} is truncated or damaged: it starts as a zip archive but {e}.") from e
    with archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise CheckpointError(f"{path} is a zip archive but not a torch checkpoint: it has no data.pkl.")
        prefix = pickles[0][: -len("data.pkl")]
        byteorder = "little"
        if prefix + "byteorder" in names:
            byteorder = archive.read(prefix + "byteorder").decode("ascii").strip()
        storages = {}
        try:
            obj = _unpickle(io.BytesIO(archive.read(pickles[0])), storages, path, "pickle")
            for key, s in storages.items():
                if getattr(s, "view_of", None):
                    continue
                raw = archive.read(f"{prefix}data/{key}")
                if len(raw) < s.numel * _itemsize(s.dtype):
                    raise CheckpointError(f"{path} is truncated: storage {key} holds {len(raw)} bytes, "
                                          f"fewer than its {s.numel} elements need.")
                s.array = _dtype_array(raw[: s.numel * _itemsize(s.dtype)], s.dtype, byteorder)
        except (zipfile.BadZipFile, KeyError, EOFError, OSError) as e:  # a member missing or cut short
            raise CheckpointError(f"{path} is truncated or damaged: {e}.") from e
    _resolve_views(storages)
    return _materialise(obj)


def _load_legacy(path):
    with open(path, "rb") as f:
        data = f.read()
    stream = io.BytesIO(data)
    storages = {}
    try:
        magic = _unpickle(stream, storages, path, "header")
    except CheckpointError:
        magic = None
    if magic != LEGACY_MAGIC:
        raise CheckpointError(f"{path} is not a torch checkpoint: it is neither a zip archive nor a legacy "
                              "torch file (no magic number).")
    protocol = _unpickle(stream, storages, path, "header")
    if protocol != LEGACY_PROTOCOL:
        raise CheckpointError(f"{path} is a legacy torch file of protocol {protocol!r}; only {LEGACY_PROTOCOL} is read.")
    sys_info = _unpickle(stream, storages, path, "header")
    if not isinstance(sys_info, dict) or not sys_info.get("little_endian", True):
        raise CheckpointError(f"{path} was written on a big-endian machine; only little-endian files are read.")
    obj = _unpickle(stream, storages, path, "pickle")
    keys = _unpickle(stream, storages, path, "storage list")
    if not isinstance(keys, list):
        raise CheckpointError(f"{path} is damaged: its storage list is a {type(keys).__name__}.")
    for key in keys:
        s = storages.get(str(key))
        if s is None:
            raise CheckpointError(f"{path} is damaged: it stores bytes for storage {key}, which no tensor uses.")
        head = stream.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{path} is truncated: the bytes of storage {key} are missing.")
        (numel,) = struct.unpack("<q", head)
        raw = stream.read(numel * _itemsize(s.dtype))
        if numel != s.numel or len(raw) < numel * _itemsize(s.dtype):
            raise CheckpointError(f"{path} is truncated: storage {key} should hold {s.numel} elements.")
        s.array = _dtype_array(raw, s.dtype)
    missing = [k for k, s in storages.items() if s.array is None and not getattr(s, "view_of", None)]
    if missing:
        raise CheckpointError(f"{path} is truncated: storage {missing[0]} has no bytes.")
    _resolve_views(storages)
    return _materialise(obj)


def is_checkpoint(path):
    """Whether `path` is a file that starts as a torch checkpoint does (a zip archive, or the
    legacy format's pickle), not an HDF5 file such as Keras' `.weights.h5`."""
    if not os.path.isfile(str(path)):
        return False
    with open(str(path), "rb") as f:
        start = f.read(4)
    return start == b"PK\x03\x04" or start[:1] == b"\x80"


def load(path):
    """The object `torch.save` wrote to `path`, tensors as numpy arrays, read without torch and
    without running anything the file names (`CheckpointError` says why a file is refused)."""
    path = str(path)
    with open(path, "rb") as f:
        start = f.read(4)
    if start == b"PK\x03\x04":
        return _load_zip(path)
    return _load_legacy(path)
