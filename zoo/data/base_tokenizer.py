"""The one tokenizer interface (`Tokenizer`) that every tokenizer implements and everything else
calls, and the registry that reads any registered tokenizer back from a preset directory.

A tokenizer's encoding and decoding exist once, as TensorFlow ops (its `graph`, see
`zoo.data.graph_tokenizers`): the Python API below runs those ops eagerly, and an export traces
the very same object into its graph, so Python and a served model cannot disagree.

A tokenizer defined outside the package subclasses `Tokenizer`, implements `__len__`,
`build_graph`, `save` and `load`, and registers itself with `@register_tokenizer`; a preset
directory then saves it and `zoo.load` reads it back (its module must be imported first, as a
Keras custom object's must), and `zoo.export.export_saved_model` runs it in the graph.
"""

from __future__ import annotations

import abc
import functools
import os
import re
from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf

from zoo.data.graph_tokenizers import GRAPH_MEMBERS, GraphTokenizer

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
RESERVED = (PAD, BOS, EOS)
CHUNK = 10_000  # lines encoded per call of the graph
SURROGATES = re.compile("[\ud800-\udfff]")

_REGISTRY: dict[str, type] = {}  # each registered class's `files[0]` (its marker file) → the class
PRESET_OWN = ("config.json", "model.weights.h5")  # a preset directory's own files (zoo.preset_directory)


def register_tokenizer(cls: type) -> type:
    """Class decorator: `load_tokenizer` reads `cls` back from a directory holding its first file
    (`cls.files[0]`), and preset directories replace all of `cls.files` when they are saved over.

    Returns `cls`. A class that is not a `Tokenizer` with a `kind` and `files`, or whose first file
    another registered class already uses, is refused in one sentence.

    >>> @register_tokenizer
    ... class Letters(Tokenizer):
    ...     kind, files = "letters-example", ("letters-example.txt",)
    >>> registered_files(markers=True)[0]
    'letters-example.txt'
    >>> _ = _REGISTRY.pop("letters-example.txt")
    """
    if not (isinstance(cls, type) and issubclass(cls, Tokenizer)):
        raise TypeError(f"register_tokenizer takes a subclass of zoo.data.Tokenizer, got {cls!r}.")
    if (not isinstance(cls.kind, str) or not cls.kind or not isinstance(cls.files, (tuple, list)) or not cls.files
            or not all(isinstance(f, str) and f for f in cls.files)):
        raise ValueError(f"{cls.__name__} must set `kind` (its name) and `files` (a tuple of the file names its "
                         f"`save` writes, the first of which marks it in a directory) to be registered, got kind "
                         f"{cls.kind!r} and files {cls.files!r}.")
    others = [other for other in _REGISTRY.values() if _name(other) != _name(cls)]
    for name in cls.files:
        owner = next((o.__name__ for o in others if name in o.files), "the preset directory" if name in PRESET_OWN
                     else None)
        if owner is not None:
            raise ValueError(f"{cls.__name__}'s file {name} is already {owner}'s; give it a file of its own.")
    kind = next((o.__name__ for o in others if o.kind == cls.kind), None)
    if kind is not None:
        raise ValueError(f"{cls.__name__}'s kind {cls.kind!r} is already {kind}'s; give it a kind of its own.")
    for marker in [m for m, o in _REGISTRY.items() if _name(o) == _name(cls)]:
        del _REGISTRY[marker]  # the same class registered again (its module reloaded)
    _REGISTRY[cls.files[0]] = cls
    return cls


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_registered(tokenizer: Tokenizer) -> None:
    """Refuses, in one sentence, to save a tokenizer whose class `load_tokenizer` cannot read back.

    >>> from zoo.data import WordTokenizer
    >>> check_registered(WordTokenizer(["<pad>", "<s>", "</s>", "<unk>"]))
    """
    cls = type(tokenizer)
    if not any(registered is cls or issubclass(cls, registered) and cls.files == registered.files
               for registered in _REGISTRY.values()):
        raise ValueError(f"{cls.__name__} is not registered, so a preset directory could not read it back: "
                         "decorate the class with @zoo.data.register_tokenizer.")


def registered_files(markers: bool = False) -> list[str]:
    """Every file a registered tokenizer may write into a preset directory (with `markers`, only
    the first of each, which marks it).

    Returns them in the order `load_tokenizer` looks for them (the last registered first), each once.

    >>> registered_files(markers=True)
    ['tokenizer.json', 'vocabulary.txt']
    """
    files = []
    for cls in reversed(_REGISTRY.values()):
        files.extend(f for f in (cls.files[:1] if markers else cls.files) if f not in files)
    return files


def saved_tokenizer_class(directory: str | os.PathLike) -> type | None:
    """The registered class whose marker file `directory` holds, or None.

    >>> saved_tokenizer_class("/nonexistent") is None
    True
    """
    for marker, cls in reversed(_REGISTRY.items()):
        if os.path.exists(os.path.join(directory, marker)):
            return cls
    return None


def _utf8(text: str | bytes) -> bytes:
    """`text` as the bytes the graph reads: a `str` as UTF-8 (a lone surrogate, which UTF-8
    cannot hold, as U+FFFD), `bytes` as they are (the graph reads invalid UTF-8 as U+FFFD)."""
    if isinstance(text, (bytes, bytearray, np.bytes_)):
        return bytes(text)
    if isinstance(text, str):
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return SURROGATES.sub("\ufffd", text).encode("utf-8")
    raise TypeError(f"A line of text must be a str or bytes, got {type(text).__name__} {text!r}.")


def _strings(tensor: tf.Tensor) -> list[str]:
    return [value.decode("utf-8", "replace") for value in tensor.numpy().reshape(-1).tolist()]


def texts_through(function, lines: Iterable[str | bytes]) -> list[str]:
    """`function` (strings [n] → strings [n], a `tf.function`) over `lines`, `CHUNK` at a time."""
    lines = [_utf8(line) for line in lines]
    return [text for start in range(0, len(lines), CHUNK)
            for text in _strings(function(tf.constant(lines[start:start + CHUNK], tf.string)))]


class Tokenizer(abc.ABC):
    """What every tokenizer is: ids 0 `<pad>`, 1 `<s>`, 2 `</s>` and an `unk_id`; `len()` the
    number of ids (a model's `vocabulary_size`); and text ↔ ids through its `graph`.

    A subclass implements `__len__`, `build_graph` (the TensorFlow ops, see
    `zoo.data.graph_tokenizers` for their interface), `save` and `load`, and sets:

    - `kind`: its name (saved in configs, `--tokenizer`); `files`: the files `save` writes;
    - `scores_per_word`: True when its tokens are pieces of words, so that `score(text)` and an
      export's `serving_default` sum them per whitespace-separated word;
    - `never_encoded`: ids no text encodes to, which generation never emits;
    - `unit`: what its tokens are, for messages ("words", "characters", "pieces").

    Text may be `str` or `bytes` (read as UTF-8, invalid sequences as U+FFFD).

    >>> from zoo.data import WordTokenizer
    >>> tokenizer = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "the", "cat"])
    >>> isinstance(tokenizer, Tokenizer), tokenizer.encode("the  cat sat")
    (True, [1, 4, 5, 3, 2])
    >>> tokenizer.decode([1, 4, 5, 3, 2]), tokenizer.decode([1, 4, 2], strip_specials=False)
    ('the cat <unk>', '<s> the </s>')
    """

    kind: str = ""
    files: tuple[str, ...] = ()
    pad_id, bos_id, eos_id = 0, 1, 2
    unk_id: int = 3
    scores_per_word = False
    never_encoded: tuple[int, ...] = ()
    unit = "tokens"
    special_separator = " "  # between a special id's name and the text around it (`decode`)

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of ids."""

    @abc.abstractmethod
    def build_graph(self) -> GraphTokenizer:
        """A new object with the in-graph interface (`zoo.data.graph_tokenizers.GraphTokenizer`)."""

    @abc.abstractmethod
    def save(self, directory: str | os.PathLike) -> str:
        """Writes the tokenizer's `files` into `directory`; returns the first one's path."""

    @classmethod
    @abc.abstractmethod
    def load(cls, directory: str | os.PathLike) -> Tokenizer:
        """The tokenizer saved in `directory` (a `ValueError` naming a missing or bad file)."""

    # -- the graph, built once per tokenizer --------------------------------------------------

    @property
    def graph(self) -> GraphTokenizer:
        """This tokenizer's TensorFlow ops (built on first use, then kept): what its Python API
        runs and what an export traces. A graph missing a member of the interface is refused in
        one sentence naming them."""
        if self.__dict__.get("_graph_pid") != os.getpid():
            if "_graph_pid" in self.__dict__:
                raise RuntimeError(
                    f"This {type(self).__name__} ran TensorFlow in process {self._graph_pid}, and TensorFlow "
                    "cannot run in a child forked from it: start child processes with multiprocessing's 'spawn' "
                    "(the tokenizer pickles), or use the tokenizer in the parent only.")
            graph = self.build_graph()
            missing = [m for m in GRAPH_MEMBERS if not hasattr(graph, m)]
            if missing:
                raise TypeError(f"{type(self).__name__}.build_graph() returned {type(graph).__name__}, which lacks "
                                f"{', '.join(missing)} of the in-graph interface (zoo.data.graph_tokenizers.GraphTokenizer).")
            self._graph, self._graph_pid = graph, os.getpid()
        return self._graph

    def __getstate__(self) -> dict:
        """Pickles without the graph and its functions (TensorFlow objects); they are built again
        on first use."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_graph_pid", "_functions")}

    def _function(self, name: str, fn, *specs: tf.TypeSpec):
        functions = self.__dict__.setdefault("_functions", {})
        if name not in functions:
            # Traced through a partial of this tokenizer's own: tf.function counts the traces of a
            # function (or bound method) by its code, shared by every tokenizer of a class, so each
            # new tokenizer's first trace would be reported as retracing ("5 out of the last 5 calls").
            functions[name] = tf.function(functools.partial(fn), input_signature=list(specs), autograph=False)
        return functions[name]

    def graph_tokenizer(self, asset_dir: str | None = None) -> GraphTokenizer:
        """Former name of `graph` (`asset_dir` is no longer used: the vocabulary is in the graph);
        it warns and is removed in 0.2.0."""
        from zoo.deprecation import warn

        warn(f"{type(self).__name__}.graph_tokenizer()", f"{type(self).__name__}.graph")
        return self.graph

    # -- text → ids -----------------------------------------------------------------------------

    def encode(self, text: str | bytes, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        """The ids of one line, wrapped in `<s> … </s>` unless told otherwise."""
        return self.encode_batch([text], add_bos, add_eos)[0]

    def encode_batch(self, lines: Iterable[str | bytes], add_bos: bool = True,
                     add_eos: bool = True) -> list[list[int]]:
        """`[encode(line, add_bos, add_eos) for line in lines]`, run through the graph together."""
        lines = [_utf8(line) for line in lines]
        encode = self._function("encode", self.graph.encode, tf.TensorSpec([None], tf.string))
        out = []
        for start in range(0, len(lines), CHUNK):
            ragged = encode(tf.constant(lines[start:start + CHUNK], tf.string))
            out.extend(self._wrapped(ragged.flat_values.numpy(), ragged.row_splits.numpy(), add_bos, add_eos))
        return out

    def _wrapped(self, flat, splits, add_bos, add_eos):
        """Rows of `flat` cut at `splits`, each with `<s>` before and `</s>` after as asked."""
        lengths = np.diff(splits)
        ends = np.cumsum(lengths + int(add_bos) + int(add_eos))
        starts = ends - lengths - int(add_bos) - int(add_eos)
        out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.int32)
        body = np.ones(len(out), dtype=bool)
        if add_bos:
            out[starts], body[starts] = self.bos_id, False
        if add_eos:
            out[ends - 1], body[ends - 1] = self.eos_id, False
        out[body] = flat
        out = out.tolist()
        return [out[a:b] for a, b in zip(starts.tolist(), ends.tolist())]

    def normalize(self, text: str | bytes) -> str:
        """The one normalisation the tokenizer applies: `decode(encode(text))` when every token of
        `text` is known."""
        return self.normalize_batch([text])[0]

    def normalize_batch(self, lines: Iterable[str | bytes]) -> list[str]:
        """`[normalize(line) for line in lines]`, run through the graph together."""
        return texts_through(self._function("normalize", self.graph.normalize, tf.TensorSpec([None], tf.string)),
                             lines)

    # -- ids → text -----------------------------------------------------------------------------

    def check_ids(self, ids: Iterable[int]) -> np.ndarray:
        """`ids` (one row) as an int64 array, or an `IndexError` naming the range when one is outside."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if ids.ndim != 1 or ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"Token ids must be one row of whole numbers, got an array of shape {ids.shape} and "
                             f"dtype {ids.dtype}.")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError(f"Token ids must be in [0, {len(self)}), got {ids.min()}…{ids.max()}.")
        return ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True, whole_characters: bool = False) -> str:
        """The text of `ids`; `<pad>`, `<s>` and `</s>` are dropped, or, with
        `strip_specials=False`, written by name (between `special_separator`s). With
        `whole_characters` (what `generate` writes), bytes at the end that begin a UTF-8 character
        without finishing it are left out rather than written as U+FFFD."""
        ids = self.check_ids(ids)
        if strip_specials:
            return self.decode_batch([ids], whole_characters)[0]
        runs, run = [], []  # each special id alone, the ids between them together
        for i in ids.tolist():
            if i < len(RESERVED):
                runs += [run, [i]] if run else [[i]]
                run = []
            else:
                run.append(i)
        runs += [run] if run else []
        texts = iter(self.decode_batch([r for r in runs if r[0] >= len(RESERVED)]))
        parts = [RESERVED[r[0]] if r[0] < len(RESERVED) else next(texts) for r in runs]
        return self.special_separator.join(parts)

    def decode_batch(self, rows: Sequence[Iterable[int]], whole_characters: bool = False) -> list[str]:
        """`[decode(row, whole_characters=whole_characters) for row in rows]`, run together."""
        rows = [self.check_ids(row) for row in rows]
        if not rows:
            return []
        whole = bool(whole_characters)
        decode = self._function(
            f"decode-{whole}", lambda flat, lengths: self.graph.decode(
                tf.RaggedTensor.from_row_lengths(flat, lengths), whole_characters=whole),
            tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64))
        return _strings(decode(np.concatenate(rows), np.array([len(row) for row in rows], np.int64)))

    def token_texts(self, ids: Iterable[int]) -> list[str]:
        """The readable text of each id (the reserved ones by name)."""
        ids = self.check_ids(ids)
        texts = self._function("token_texts", self.graph.token_texts, tf.TensorSpec([None], tf.int64))
        return _strings(texts(tf.constant(ids, tf.int64)))

    def word_index(self, ids: Iterable[int]) -> list[int]:
        """For the ids of one encoded line: the index of the whitespace-separated word each id
        belongs to; -1 for `<s>` (and `<pad>`), one past the last word for `</s>`. Here every
        other id is a word of its own; a tokenizer of pieces overrides it."""
        out, words = [], 0
        for position, i in enumerate(self.check_ids(ids).tolist()):
            if i == self.pad_id or self.opens_line(i, position):
                out.append(-1)
            elif i == self.eos_id:
                out.append(words)
            else:
                out.append(words)
                words += 1
        return out

    def opens_line(self, i: int, position: int) -> bool:
        """Whether id `i` at `position` of an encoded line is its line start (a `</s>` line start,
        fairseq's, opens a line only as its first id)."""
        return i == self.bos_id and (self.bos_id != self.eos_id or position == 0)

    # -- what callers ask instead of testing the kind ---------------------------------------------

    def export_notes(self) -> dict:
        """What an export's `zoo_export.json` says of this tokenizer beyond its kind and ids
        (here: nothing)."""
        return {}

    def unknown_share(self, lines: Iterable[str]) -> float | None:
        """The share of the words of `lines` read as `<unk>`, or None when that is not a share of
        words (here: None; a closed word vocabulary says)."""
        return None

    def check_extendable(self, what: str = "This model") -> None:
        """Refuses, in one sentence, to extend a tokenizer that cannot be (here: any), naming
        `what` holds it."""
        raise ValueError(
            f"Only a subword (SentencePiece) tokenizer can be extended; {what[0].lower() + what[1:]} has a "
            f"{self.kind} tokenizer, whose unknown {self.unit} all map to <unk> (train a subword model "
            "instead: --tokenizer subword).")


def load_registered(directory: str | os.PathLike) -> Tokenizer | None:
    """The registered tokenizer saved in `directory`, or None when it holds none.

    >>> load_registered("/nonexistent") is None
    True
    """
    cls = saved_tokenizer_class(directory)
    return None if cls is None else cls.load(directory)
