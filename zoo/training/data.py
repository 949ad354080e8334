"""The training data: the corpus, and its windows served in an order that is a pure function of
the step, each worker and replica taking its slice of every global batch."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from zoo.data import pipeline
from zoo.data.corpus import read_lines
from zoo.data.datasets import build_tokenizer
from zoo.data.tokenizers import SubwordTokenizer, VocabularySizeError
from zoo.deprecation import renamed_keywords

if TYPE_CHECKING:
    from zoo.data import CharTokenizer, WordTokenizer


# Corpora whose published protocol fixes a word vocabulary (their perplexities are only
# comparable with it): the Penn Treebank, and directories holding the benchmark files of the
# treebank or of WikiText.
PROTOCOL_FILES = {"ptb.train.txt": "the Penn Treebank", "wiki.train.tokens": "WikiText"}
TOKENIZERS = ("word", "char", "subword")
# The subword vocabulary learned from raw text when no size is asked for: on raw English, 16,000
# ids (with the adaptive softmax they get above ADAPTIVE_THRESHOLD) reached a lower per-word
# perplexity than 8,000 in the same time (`zoo benchmark raw-text`; see docs/benchmarks.md).
DEFAULT_SUBWORD_SIZE = 16_000


def fixed_protocol(data):
    """The name of the benchmark whose protocol fixes `data`'s word vocabulary, or None for text
    that gets the tokenizer of our choosing."""
    if data == "ptb":
        return "the Penn Treebank"
    if isinstance(data, str) and os.path.isdir(data):
        for name, benchmark in PROTOCOL_FILES.items():
            if os.path.isfile(os.path.join(data, name)):
                return benchmark
    return None


def choose_tokenizer(data, preset_kind, tokenizer=None, vocabulary_size=None):
    """The kind of tokenizer to learn from `data`'s training split: `tokenizer` if given (refused
    on a corpus whose protocol fixes its vocabulary), else the preset's character vocabulary
    ("char"), the benchmark's word vocabulary, or a learned subword vocabulary for any other
    text."""
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise ValueError(f"Unknown tokenizer {tokenizer!r}; expected one of {', '.join(TOKENIZERS)}.")
    protocol = fixed_protocol(data)
    if protocol and tokenizer not in (None, "word"):
        raise ValueError(f"{protocol[:1].upper()}{protocol[1:]}'s published protocol fixes its word vocabulary (its perplexities are "
                         f"only comparable with it); drop --tokenizer {tokenizer}.")
    kind = tokenizer or ("word" if protocol else "char" if preset_kind == "char" else "subword")
    if vocabulary_size is not None and kind != "subword":
        raise ValueError(f"--vocabulary-size sets the size of a learned subword vocabulary, not of a {kind} "
                         "one; use --max-vocabulary (and --min-count) for a word vocabulary.")
    return kind


@renamed_keywords(tokenizer=("tokenizer_kind", str), vocabulary="tokenizer")
def load_corpus(data: str | os.PathLike, tokenizer: WordTokenizer | CharTokenizer | SubwordTokenizer | None = None,
                vocabulary_kind: str | None = "word", min_count: int = 1, max_vocabulary: int | None = None,
                tokenizer_kind: str | None = None, vocabulary_size: int | None = None,
                log: Callable[[str], None] | None = None
                ) -> tuple[list[str], list[str], WordTokenizer | CharTokenizer | SubwordTokenizer]:
    """`(train_lines, valid_lines, tokenizer)` of the corpus `data`: `tokenizer` if given (a
    preset directory's own tokenizer; a `tokenizer_kind` flag must then agree with it), else a
    tokenizer learned from the training split (`choose_tokenizer`).

    Until 0.2.0, a string given as `tokenizer=` is the former keyword of `tokenizer_kind` (it warns).
    `log` takes its notes (by default the `zoo.training.data` logger, at INFO).

    Returns:
        The training and validation lines, and the tokenizer.

    Example: a directory of one file per split, with a word vocabulary learned from it.

    >>> import tempfile
    >>> from zoo.training import load_corpus
    >>> corpus = tempfile.mkdtemp()
    >>> for split, lines in (("train", ["the cat sat", "the dog sat"]), ("valid", ["a cat"])):
    ...     with open(os.path.join(corpus, f"{split}.txt"), "w") as f:
    ...         _ = f.write("\\n".join(lines))
    >>> train_lines, valid_lines, tokenizer = load_corpus(corpus, tokenizer_kind="word")
    >>> train_lines, valid_lines, type(tokenizer).__name__, len(tokenizer)
    (['the cat sat', 'the dog sat'], ['a cat'], 'WordTokenizer', 8)
    """
    log = log or logging.getLogger(__name__).info
    train_lines = read_lines(data, "train")
    valid_lines = read_lines(data, "valid")
    if tokenizer is not None:
        kind = tokenizer.kind
        if tokenizer_kind not in (None, kind) or vocabulary_size is not None:
            raise ValueError(f"The preset directory's model reads {kind} ids with its own saved tokenizer "
                             f"({len(tokenizer):,} ids); drop --tokenizer/--vocabulary-size to fine-tune it.")
        return train_lines, valid_lines, tokenizer
    kind = choose_tokenizer(data, vocabulary_kind, tokenizer_kind, vocabulary_size)
    if kind != "subword":
        return train_lines, valid_lines, build_tokenizer(data, kind, min_count, max_vocabulary)
    began = time.monotonic()
    try:
        tokenizer = SubwordTokenizer.train(train_lines, vocabulary_size or DEFAULT_SUBWORD_SIZE)
    except VocabularySizeError as e:
        if vocabulary_size is not None:  # asked for: say so rather than train something else
            raise
        log(f"The corpus is too small for the default {DEFAULT_SUBWORD_SIZE:,} subword ids; using {e.largest:,}, "
            "the most it supplies.")
        tokenizer = SubwordTokenizer.train(train_lines, e.largest)
    summary = tokenizer.training_summary
    cut = (f"; {summary['long_lines']:,} lines longer than the trainer takes were cut at whitespace"
           if summary["long_lines"] else "")
    sampled = ("" if summary["sampled_sentences"] == summary["sentences"] else
               f", a random {summary['sampled_sentences']:,} of its {summary['sentences']:,} sentences")
    log(f"Learned a subword vocabulary of {len(tokenizer):,} ids (SentencePiece, byte fallback: no "
        f"unknown token) from {summary['lines']:,} training lines, {summary['sampled_words']:,} of their "
        f"{summary['words']:,} words{sampled}{cut}, in {time.monotonic() - began:.1f} s.")
    return train_lines, valid_lines, tokenizer


class TrainingWindows:
    """The training stream cut into windows, served in global batches whose order is a pure
    function of the step.

    Pass p over the data (an "epoch" of the stream) visits the windows in the order of a
    permutation drawn from the stateless seed `(seed, p)`, in `batches_per_pass` global batches
    (the last incomplete one dropped). So the batch of step s is known from s alone: a resumed
    run starts its dataset at its checkpoint's step, and a job of any number of workers sees the
    global batches a single process sees, each worker taking its slice of every batch.

    Example: 16 lines cut into windows of 8 tokens, in global batches of 2; the dataset started
    at step 3 (a resumed run) serves the batch the one started at 0 serves fourth.

    >>> from zoo.data import WordTokenizer
    >>> from zoo.training import TrainingWindows
    >>> lines = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "the end"] * 4
    >>> windows = TrainingWindows.from_lines(lines, WordTokenizer.build(lines), seq_len=8, global_batch_size=2)
    >>> windows.batches_per_pass, [a.shape for a in windows.arrays]  # inputs, targets, weights
    (6, [(12, 8), (12, 8), (12, 8)])
    >>> one_device = tf.distribute.InputContext()
    >>> fourth = list(windows.dataset(0, one_device).take(4))[-1]
    >>> resumed = next(iter(windows.dataset(3, one_device)))
    >>> all(bool(tf.reduce_all(a == b)) for a, b in zip(fourth, resumed))
    True
    """

    def __init__(self, inputs: np.ndarray, targets: np.ndarray, weights: np.ndarray, global_batch_size: int,
                 seed: int = 0):
        self.arrays = (inputs, targets, weights)
        self.global_batch_size = global_batch_size
        self.seed = seed
        self.batches_per_pass = len(inputs) // global_batch_size
        if self.batches_per_pass < 1:
            raise ValueError(
                f"The training data has {len(inputs)} window{'' if len(inputs) == 1 else 's'}, fewer than one global batch of "
                f"{global_batch_size}; use a smaller --global-batch-size or --seq-len, or more data."
            )

    @classmethod
    @renamed_keywords(vocabulary="tokenizer")
    def from_lines(cls, lines: Sequence[str], tokenizer: WordTokenizer | CharTokenizer | SubwordTokenizer,
                   seq_len: int, global_batch_size: int, seed: int = 0) -> TrainingWindows:
        """The windows of `seq_len` tokens (no unscored context) of the stream of `lines`."""
        return cls(*pipeline.stream_arrays(lines, tokenizer, seq_len), global_batch_size, seed)

    def _order(self, p):
        n = len(self.arrays[0])
        keys = tf.random.stateless_uniform([n], seed=tf.stack([tf.constant(self.seed, tf.int64), p]))
        used = self.batches_per_pass * self.global_batch_size
        return tf.reshape(tf.argsort(keys)[:used], (self.batches_per_pass, self.global_batch_size))

    def dataset(self, start_step: int, context: tf.distribute.InputContext) -> tf.data.Dataset:
        """The dataset of one input pipeline (`tf.distribute.InputContext`), from `start_step`."""
        first_pass, offset = divmod(int(start_step), self.batches_per_pass)
        passes = tf.data.Dataset.range(first_pass, 2**62)
        batches = passes.flat_map(lambda p: tf.data.Dataset.from_tensor_slices(self._order(p)))
        return shard_rows(batches.skip(offset), self.arrays, self.global_batch_size, context)


def shard_rows(index_batches: tf.data.Dataset, arrays: Sequence[np.ndarray], global_batch_size: int,
               context: tf.distribute.InputContext) -> tf.data.Dataset:
    """Per-replica batches of `arrays` rows from a dataset of global batches of row indices.

    Worker w of W takes rows [w·B/W, (w+1)·B/W) of every global batch, and its local replicas
    consecutive slices of those, so replica r of the job holds rows [r·B/R, (r+1)·B/R).

    Returns:
        The dataset of this input pipeline's per-replica batches: a tuple of rows of each array.

    Example: global batches of 4 rows, on the second of two workers with one replica each.

    >>> from zoo.training import shard_rows
    >>> rows = np.arange(8) * 10
    >>> index = tf.data.Dataset.from_tensor_slices([[0, 1, 2, 3], [4, 5, 6, 7]])
    >>> second = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    >>> [batch[0].numpy().tolist() for batch in shard_rows(index, [rows], 4, second)]
    [[20, 30], [60, 70]]
    """
    workers, worker = context.num_input_pipelines, context.input_pipeline_id
    per_worker = global_batch_size // workers
    per_replica = context.get_per_replica_batch_size(global_batch_size)
    tensors = tuple(tf.constant(a) for a in arrays)
    ds = index_batches.map(lambda idx: idx[worker * per_worker:(worker + 1) * per_worker])
    ds = ds.unbatch().batch(per_replica, drop_remainder=True)
    ds = ds.map(lambda idx: tuple(tf.gather(t, idx) for t in tensors),
                num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


@renamed_keywords(vocabulary="tokenizer")
def evaluation_windows(lines: Sequence[str], tokenizer: WordTokenizer | CharTokenizer | SubwordTokenizer,
                       seq_len: int, context: int, global_batch_size: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stream windows with `context` tokens of unscored left context, padded with weight-0
    windows to a whole number of global batches, so every replica sees the same number of
    batches (a collective step needs every worker).

    Returns:
        `(inputs, targets, weights)`, each `[windows, context + seq_len]`; a weight is 0 for a
        context or padding position.

    Example: the 13 tokens of two lines (each line's `</s>` included) in windows of 8 with 2
    tokens of context, padded with windows of weight 0 to a multiple of 4 windows.

    >>> from zoo.data import WordTokenizer
    >>> from zoo.training import evaluation_windows
    >>> lines = ["the cat sat on the mat", "a cat and a dog"]
    >>> inputs, targets, weights = evaluation_windows(lines, WordTokenizer.build(lines), 8, 2, 4)
    >>> inputs.shape, weights.sum(axis=1).tolist()
    ((4, 10), [9.0, 4.0, 0.0, 0.0])
    """
    inputs, targets, weights = pipeline.stream_arrays(lines, tokenizer, seq_len, context)
    pad = -len(inputs) % global_batch_size
    if pad:
        inputs, targets, weights = (
            np.concatenate([a, np.zeros((pad,) + a.shape[1:], a.dtype)]) for a in (inputs, targets, weights)
        )
    return inputs, targets, weights
