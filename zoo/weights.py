"""Where a model's weights come from: `zoo.load(name_or_dir, weights=..., weights_sha256=...)`,
found as a local file or directory by `fetch`.

`weights` is one of:

- None (the default): a preset name gets random weights, and says so once per name per process
  (a warning of the `zoo.weights` logger, `notice_random_weights`); a preset directory gets its own `model.weights.h5`.
- "random": random weights, silently (a preset directory still brings its tokenizer).
- "trained": the preset's trained weights that ship inside the package (`TRAINED` below),
  checked against their SHA-256 before loading.
- A local path: a `.weights.h5` file or a preset directory (its tokenizer comes with it).
  `file://` addresses are local paths.
- Any other address `tf.io.gfile` reads (`gs://bucket/run/best`, `ram://...`): the file, or the
  top-level files of a preset directory, are copied to a temporary local directory first (Keras'
  HDF5 loader reads local files only) and deleted after loading.
- An `https://` (or `http://`) address of a `.weights.h5` file, with `weights_sha256` (required:
  an address alone says nothing about what arrives). The file is downloaded once into the cache
  directory (`$ZOO_CACHE_DIR`, default `~/.cache/zoo/weights`) as `<12 hex of the URL's
  SHA-256>-<the URL's file name>`, so two addresses with the same file name never collide.
  `keras.utils.get_file` downloads it into a scratch folder of that directory; it is checked, and
  renamed into place (atomic), so the
  cache never holds a partial or unchecked file: a wrong checksum leaves nothing behind. A cached
  file whose checksum matches is used without any request; one that does not match is
  downloaded again.

`weights_sha256` also checks a local or gfile weights file when given. Every failure is one
sentence (a `ValueError`) naming the file or address.

Shipping trained weights for a preset is one entry in `TRAINED` plus its file:

    TRAINED = {
        "gcnn-ptb": Trained("trained_weights/gcnn-ptb.weights.h5", "<64 hex digits: sha256sum of the file>"),
    }

The path is relative to the `zoo` package directory (this file's folder), so the file lives at
`zoo/trained_weights/gcnn-ptb.weights.h5`; setup.py's `package_data` installs every
`zoo/trained_weights/*.weights.h5` and every file of a folder under it. A preset whose
tokenizer is learned (a subword preset) ships a whole preset directory instead,
`trained_weights/gcnn-en/` (`config.json`, `model.weights.h5`, the tokenizer's files), and its
entry names the directory's `model.weights.h5`: `weights="trained"` then loads the directory,
tokenizer included. The file is `model.save_weights(...)` of the preset as registered (no
config overrides), float16 if it should be small (Keras casts to the model's dtype on load);
`zoo/weights_test.py` checks every entry (a registered preset, a well-formed checksum, the file
present and matching it).
"""

import hashlib
import http.client
import logging
import os
import re
import shutil
import socket
import tempfile
import typing
import urllib.error
import urllib.parse
import urllib.request

import tensorflow as tf

from zoo.errors import reason
from zoo.preset_directory import WEIGHTS_FILE


class Trained(typing.NamedTuple):
    """Trained weights that ship for a preset: `path` relative to the `zoo` package directory,
    and the file's SHA-256 as 64 hexadecimal digits."""

    path: str
    sha256: str


# preset name -> Trained(path relative to the zoo package directory, sha256): the treebank GCNNs
# and LSTM of `zoo reproduce ptb-sentence` (results/ptb-sentence.json), and gcnn-en, a preset
# directory (docs/models/gcnn-en.md), all stored in float16.
TRAINED = {
    "gcnn-ptb": Trained("trained_weights/gcnn-ptb.weights.h5",
                        "dab8fc1a65f9b1249fee8fe7a1d627559a1e70dab526efa4c5c36d82d6f610b6"),
    "gcnn-ptb-deep": Trained("trained_weights/gcnn-ptb-deep.weights.h5",
                             "b183c35a13337f4dad9d189c1df755490a2743cfef183a4b228d33db3d5320f7"),
    "lstmp-ptb": Trained("trained_weights/lstmp-ptb.weights.h5",
                         "372597f1ce0e25dcc5007b52c02559b37f18526482570946a615faecb493c643"),
    "gcnn-en": Trained("trained_weights/gcnn-en/model.weights.h5",
                       "96a6db7cf9e2631b05986764985cf1d07e3825d375aa5a1b84777d9d96a39280"),
    "gcnn-moe-en": Trained("trained_weights/gcnn-moe-en/model.weights.h5",
                           "9256204e4e79643f25baa608668cf8b7a03cb119c64827c8bfa08ad38d1aa957"),
}

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
URL_SUFFIX = ".weights.h5"
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "zoo", "weights")
DOWNLOAD_TIMEOUT_S = 60
_CHUNK = 1 << 20

_NOTICED = set()  # preset names whose random-weights notice this process has printed


def trained_presets():
    """The preset names with trained weights that ship, sorted."""
    return sorted(TRAINED)


def _which_have_trained():
    names = trained_presets()
    if not names:
        return "no preset has trained weights yet"
    return "presets with trained weights: " + ", ".join(repr(n) for n in names)


def notice_random_weights(preset):
    """One warning of the `zoo.weights` logger, once per preset name per process, when a preset is
    loaded by name without `weights`: its weights are random. With no logging set up, Python
    writes a warning to stderr, so a notebook shows it; `weights="random"` asks for random weights
    without it."""
    if preset in _NOTICED:
        return
    _NOTICED.add(preset)
    if preset in TRAINED:
        hint = 'weights="trained" loads the trained ones that ship for this preset'
    else:
        hint = 'no trained weights ship for this preset; weights="trained" lists the ones that do'
    logging.getLogger(__name__).warning(f"{preset}: random weights ({hint}).")


def file_sha256(path):
    """The SHA-256 of a local file, as 64 lowercase hexadecimal digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked_sha256(value):
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", value.strip()):
        raise ValueError(f"weights_sha256 must be a SHA-256 as 64 hexadecimal digits, got {value!r}.")
    return value.strip().lower()


def _scheme(source):
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", source)
    return match.group(1).lower() if match else ""


def cache_dir():
    """Where downloaded weights are kept: `$ZOO_CACHE_DIR`, else `~/.cache/zoo/weights`."""
    return os.path.abspath(os.path.expanduser(os.environ.get("ZOO_CACHE_DIR") or DEFAULT_CACHE_DIR))


def cache_path(url):
    """The cache file of `url`: 12 hex digits of the URL's SHA-256, a dash, the URL's file name."""
    name = os.path.basename(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return os.path.join(cache_dir(), f"{hashlib.sha256(url.encode()).hexdigest()[:12]}-{name}")


def download(url, sha256):
    """A local copy of the file at `url` whose SHA-256 is `sha256`: the cached one if it matches,
    else a fresh download by `keras.utils.get_file` into a scratch folder of the cache directory,
    checked, then renamed into place; on any failure the scratch folder is removed and nothing is
    kept (get_file keeps a file whose checksum is wrong, so the check is made here)."""
    sha256 = _checked_sha256(sha256)
    name = os.path.basename(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    if not name.endswith(URL_SUFFIX):
        raise ValueError(f"A weights address must name a {URL_SUFFIX} file, got {url!r}.")
    path = cache_path(url)
    if os.path.isfile(path) and file_sha256(path) == sha256:
        return path
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        scratch = tempfile.mkdtemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".part")
    except OSError as e:
        raise ValueError(f"Cannot write to the weights cache {directory!r} ({reason(e)}); "
                         "set ZOO_CACHE_DIR to a writable directory.") from None
    try:
        part = _get_file(url, os.path.basename(path), scratch)
        actual = file_sha256(part)
        if actual != sha256:
            raise ValueError(f"The file at {url} has SHA-256 {actual}, not the expected {sha256}, "
                             "so it was not kept.")
        os.replace(part, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path


def _get_file(url, name, directory):
    """`keras.utils.get_file` of `url` into `directory/name`, with a socket timeout (get_file sets
    none) and its failures as one sentence naming the address."""
    import keras

    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        return keras.utils.get_file(fname=name, origin=url, cache_dir=directory, cache_subdir="")
    except Exception as e:  # get_file raises a bare Exception whose context is urllib's error
        cause = e.__context__ if isinstance(e.__context__, Exception) else e
        if isinstance(cause, urllib.error.HTTPError):
            raise ValueError(f"Could not download {url}: HTTP {cause.code} {reason(cause.reason)}.") from None
        if isinstance(cause, urllib.error.URLError):
            raise ValueError(f"Could not download {url}: {reason(cause.reason)}.") from None
        if isinstance(cause, (OSError, ValueError, http.client.HTTPException)):  # timeouts, resets, truncation, a full disk
            raise ValueError(f"Could not download {url}: {reason(cause)}.") from None
        raise
    finally:
        socket.setdefaulttimeout(previous)


def trained_file(preset):
    """The local path of `preset`'s shipped trained weights, checked against their SHA-256."""
    if preset not in TRAINED:
        raise ValueError(f"No trained weights ship for preset {preset!r}; {_which_have_trained()}.")
    relative, sha256 = TRAINED[preset]
    path = os.path.join(PACKAGE_DIR, relative)
    if not os.path.isfile(path):
        raise ValueError(f"The trained weights of preset {preset!r} are missing from the installed "
                         f"package (expected {path}); reinstall the zoo.")
    actual = file_sha256(path)
    if actual != sha256.lower():
        raise ValueError(f"The trained weights of preset {preset!r} at {path} have SHA-256 {actual}, not "
                         f"the expected {sha256.lower()} (a damaged install, or a Git LFS pointer?).")
    return path


def trained_source(preset):
    """What `weights="trained"` loads for `preset`: the checked weights file, or, when it is the
    `model.weights.h5` of a preset directory that ships whole (a subword preset's tokenizer and
    config beside its weights), that directory."""
    path = trained_file(preset)
    return os.path.dirname(path) if os.path.basename(path) == WEIGHTS_FILE else path


def _check_local_file(path, sha256):
    if sha256 is None:
        return
    weights_file = os.path.join(path, WEIGHTS_FILE) if os.path.isdir(path) else path
    if not os.path.isfile(weights_file):
        return  # zoo.preset_directory.load_weights says "No weights at ..."
    actual = file_sha256(weights_file)
    if actual != sha256:
        raise ValueError(f"The weights file {weights_file} has SHA-256 {actual}, not the expected {sha256}.")


def _gfile_copy(source, directory):
    """Copy `source` (a file, or a preset directory's top-level files) into the local `directory`;
    returns the local path standing for `source`."""
    try:
        if tf.io.gfile.isdir(source):
            local = os.path.join(directory, "preset")
            os.mkdir(local)
            for name in tf.io.gfile.listdir(source):
                name = name.rstrip("/")
                remote = source.rstrip("/") + "/" + name
                if not tf.io.gfile.isdir(remote):
                    tf.io.gfile.copy(remote, os.path.join(local, name), overwrite=True)
            return local
        if not tf.io.gfile.exists(source):
            raise ValueError(f"No weights at {source!r}: expected a preset directory or a .weights.h5 file.")
        local = os.path.join(directory, source.rstrip("/").rsplit("/", 1)[-1])
        tf.io.gfile.copy(source, local, overwrite=True)
        return local
    except tf.errors.OpError as e:
        raise ValueError(f"Could not read the weights at {source}: {reason(e)}.") from None


def fetch(weights, weights_sha256=None, preset=None, directory=None, scratch=None):
    """The local file or preset directory holding `weights` (see the module docstring), or None
    for random weights.

    `preset` is the preset name `zoo.load` was given, `directory` the preset directory it was
    given (weights=None then means the directory's own). A preset name loaded with weights=None
    gets the one-line random-weights notice (`notice_random_weights`). Weights that must be
    copied to be read locally (a `tf.io.gfile` address) are copied into a temporary directory
    that `scratch`, a `contextlib.ExitStack`, deletes when it closes."""
    if weights is None and directory is not None:
        weights = directory
    if weights is None or weights in ("random", "trained"):
        if weights_sha256 is not None:
            what = "the trained weights carry their own" if weights == "trained" else "there is no weights file to check"
            raise ValueError(f"weights_sha256 checks a weights file or address given as weights=; {what}.")
        if weights == "trained":
            if preset is None:
                raise ValueError('weights="trained" takes a preset name (the trained weights ship per preset), '
                                 "not a preset directory.")
            return trained_source(preset)
        if weights is None and preset is not None:
            notice_random_weights(preset)
        return None
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError('weights must be "trained", "random", a path or an address, '
                         f"got {type(weights).__name__}.")
    source = os.fspath(weights)
    sha256 = None if weights_sha256 is None else _checked_sha256(weights_sha256)
    scheme = _scheme(source)
    if scheme in ("http", "https"):
        if sha256 is None:
            raise ValueError(f"Weights from an address need their checksum: zoo.load(..., weights={source!r}, "
                             "weights_sha256=<64 hex digits of the file's SHA-256>).")
        return download(source, sha256)
    if scheme in ("", "file"):
        if scheme == "file":
            source = urllib.request.url2pathname(urllib.parse.urlsplit(source).path)
        _check_local_file(source, sha256)
        return source
    if scratch is None:
        raise ValueError(f"Weights at {source!r} are copied to a temporary directory first: give fetch a "
                         "contextlib.ExitStack as scratch to delete it.")
    local = _gfile_copy(source, scratch.enter_context(tempfile.TemporaryDirectory(prefix="zoo-weights-")))
    _check_local_file(local, sha256)
    return local


def save_float16(source, destination):
    """Copies the Keras weights file `source` to `destination` with every float32 array stored as
    float16 (half the bytes; Keras casts back to the model's dtype on load), the way a trained
    preset ships. Written to a temporary file and renamed."""
    import h5py
    import numpy as np

    tmp = f"{destination}.tmp"
    with h5py.File(source, "r") as a, h5py.File(tmp, "w") as b:
        def copy(name, item):
            if isinstance(item, h5py.Dataset):
                data = item[()]
                b.create_dataset(name, data=data.astype(np.float16) if data.dtype == np.float32 else data)
            else:
                b.require_group(name)
            for key, value in item.attrs.items():
                b[name].attrs[key] = value

        a.visititems(copy)
        for key, value in a.attrs.items():
            b.attrs[key] = value
    os.replace(tmp, destination)
    return destination


def save_trained_directory(source, destination):
    """Copies the preset directory `source` (a run's `best/`) to `destination` the way a subword
    preset ships: its config and tokenizer files as they are, its weights in float16
    (`save_float16`). Written into a temporary folder beside `destination`, then renamed over it.
    Returns the SHA-256 of the new `model.weights.h5`, for the preset's `TRAINED` entry."""
    source, destination = os.path.abspath(source), os.path.abspath(destination)
    if not os.path.isfile(os.path.join(source, WEIGHTS_FILE)):
        raise ValueError(f"{source} is not a preset directory: it has no {WEIGHTS_FILE}.")
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(destination)}.", dir=os.path.dirname(destination))
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would keep an installed copy from other users
    try:
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if name == WEIGHTS_FILE:
                save_float16(path, os.path.join(staging, name))
            elif os.path.isfile(path):
                shutil.copyfile(path, os.path.join(staging, name))
        old = f"{destination}.old"
        if os.path.exists(destination):
            os.replace(destination, old)
        os.replace(staging, destination)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return file_sha256(os.path.join(destination, WEIGHTS_FILE))

