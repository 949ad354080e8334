"""`tf.data` pipelines of (inputs, targets, sample_weight) batches for language modelling.

Two layouts, matching the two evaluation protocols:

- `stream`: every line becomes `<s> … </s>`, the lines are concatenated into one stream and
  cut into windows, so no position is padding. For evaluation each window after the first
  carries `context` extra tokens on its left which are seen but not scored, so every scored
  token has the model's full receptive field (the usual continuous Penn Treebank protocol).
- `sentence`: every line is its own sequence, scored alone (the protocol of the paper's Penn
  Treebank figure). Batches group sentences of similar length (bucketing), so padding stays a
  small fraction of the work.

Targets equal to `<s>` get weight 0: the model sees `<s>` but never has to predict it (§4.1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from zoo.data.base_tokenizer import Tokenizer
from zoo.data.corpus import check_lines
from zoo.deprecation import renamed_keywords


@renamed_keywords(vocabulary="tokenizer")
def encode(lines, tokenizer):
    return tokenizer.encode_batch(lines)


@renamed_keywords(vocabulary="tokenizer")
def stream_ids(lines, tokenizer):
    """All lines as one id stream, each wrapped in `<s> … </s>`. With a tokenizer whose line
    start is `</s>` (`bos_id == eos_id`, fairseq's convention) one `</s>` opens the stream and
    each line's `</s>` opens the next, as in fairseq's streams."""
    if tokenizer.bos_id == tokenizer.eos_id:  # one `</s>` first, then each line's own
        rows = tokenizer.encode_batch(lines, add_bos=False)
        encoded = ([[tokenizer.bos_id]] if rows else []) + rows
    else:
        encoded = tokenizer.encode_batch(lines)
    return np.fromiter((i for ids in encoded for i in ids), dtype=np.int32)


@renamed_keywords(vocabulary="tokenizer")
def unscored_id(tokenizer):
    """The id a stream's targets never score: the line start `<s>` (no model predicts it), or
    None when the line start is `</s>`, which is scored as each line's end."""
    return None if tokenizer.bos_id == tokenizer.eos_id else tokenizer.bos_id


@renamed_keywords(vocabulary="tokenizer")
def stream_arrays(lines, tokenizer, seq_len, context=0):
    """`stream_windows` of the stream of `lines`: `(inputs, targets, weights)`."""
    return stream_windows(stream_ids(lines, tokenizer), seq_len, context, unscored_id(tokenizer))


def stream_windows(ids, seq_len, context=0, bos_id=1):
    """Arrays `(inputs, targets, weights)` of shape [windows, context + seq_len].

    Window w reads `ids[w*seq_len : w*seq_len + context + seq_len]`. The first window scores
    every one of its targets (its left edge is the start of the stream, as in a whole-stream
    call); every later window scores only its last `seq_len` targets, the `context` before them
    being seen but not scored. So every target is scored once, with `context` tokens of left
    context or all there is. The last window is padded with `<pad>` (id 0, weight 0). Targets
    equal to `bos_id` (the line start) get weight 0; None scores every target.
    """
    n = len(ids) - 1  # number of next-token predictions in the stream
    if n < 1:
        raise ValueError("The stream must hold at least two tokens.")
    length = context + seq_len
    windows = 1 + max(0, -(-(n - length) // seq_len))
    padded = np.zeros((windows - 1) * seq_len + length + 1, dtype=np.int32)
    padded[: len(ids)] = ids
    idx = (np.arange(windows) * seq_len)[:, None] + np.arange(length)[None, :]
    inputs = padded[idx]
    targets = padded[idx + 1]
    weights = np.ones((windows, length), dtype=np.float32)
    weights[1:, :context] = 0.0
    weights[idx + 1 > n] = 0.0
    if bos_id is not None:
        weights[targets == bos_id] = 0.0
    return inputs, targets, weights


@renamed_keywords(vocabulary="tokenizer")
def stream_dataset(lines: Sequence[str], tokenizer: Tokenizer, batch_size: int, seq_len: int, context: int = 0,
                   shuffle: bool = False, seed: int = 0, repeat: bool = False) -> tf.data.Dataset:
    """The `stream` layout: `(inputs, targets, sample_weight)` batches of windows of `seq_len`
    scored tokens of all lines as one stream (`stream_arrays`), each window after the first with
    `context` more tokens seen but not scored.

    Returns a `tf.data.Dataset` of int32 `[batch, context + seq_len]` inputs and targets and
    float32 weights; `shuffle` shuffles the windows (and drops a last partial batch), `repeat`
    repeats them forever.

    >>> from zoo.data import WordTokenizer
    >>> tokenizer = WordTokenizer.build(["a b c", "b c"])
    >>> inputs, targets, weights = next(iter(stream_dataset(["a b c", "b c"], tokenizer, 2, 4)))
    >>> inputs.numpy().tolist(), targets.numpy().tolist(), weights.numpy().tolist()
    ([[1, 6, 4, 5], [2, 1, 4, 5]], [[6, 4, 5, 2], [1, 4, 5, 2]], [[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    """
    check_lines(lines)
    inputs, targets, weights = stream_arrays(lines, tokenizer, seq_len, context)
    ds = tf.data.Dataset.from_tensor_slices((inputs, targets, weights))
    if shuffle:
        ds = ds.shuffle(len(inputs), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    return ds.batch(batch_size, drop_remainder=shuffle).prefetch(tf.data.AUTOTUNE)


@renamed_keywords(vocabulary="tokenizer")
def sentence_dataset(lines: Sequence[str], tokenizer: Tokenizer, batch_size: int, shuffle: bool = False,
                     seed: int = 0, max_length: int | None = None,
                     boundaries: Sequence[int] = (8, 16, 24, 32, 48, 64, 96, 128)) -> tf.data.Dataset:
    """One sentence per row: inputs `<s> w1 … wn`, targets `w1 … wn </s>`, padded with 0.

    Returns a `tf.data.Dataset` of `(inputs, targets, sample_weight)` batches of sentences of
    similar lengths (bucketed at `boundaries`), each cut to `max_length` targets if given; the
    weight is 0 on padding.

    >>> from zoo.data import WordTokenizer
    >>> tokenizer = WordTokenizer.build(["a b c"])
    >>> inputs, targets, weights = next(iter(sentence_dataset(["a b c", "b"], tokenizer, 2)))
    >>> inputs.numpy().tolist(), targets.numpy().tolist(), weights.numpy().tolist()
    ([[1, 4, 5, 6], [1, 5, 0, 0]], [[4, 5, 6, 2], [5, 2, 0, 0]], [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    """
    check_lines(lines)
    sequences = encode(lines, tokenizer)
    if max_length:
        sequences = [s[: max_length + 1] for s in sequences]
    lengths = np.array([len(s) - 1 for s in sequences], dtype=np.int32)
    flat = np.fromiter((i for s in sequences for i in s), dtype=np.int32)
    ragged = tf.RaggedTensor.from_row_lengths(flat, [len(s) for s in sequences])
    ds = tf.data.Dataset.from_tensor_slices(ragged)
    if shuffle:
        ds = ds.shuffle(len(sequences), seed=seed, reshuffle_each_iteration=True)

    def split(seq):
        return seq[:-1], seq[1:]

    ds = ds.map(split, num_parallel_calls=tf.data.AUTOTUNE)
    boundaries = [b for b in boundaries if b < lengths.max()]
    ds = ds.bucket_by_sequence_length(
        lambda x, y: tf.shape(x)[0],
        bucket_boundaries=list(boundaries),
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        pad_to_bucket_boundary=False,
    )

    def add_weights(x, y):
        return x, y, tf.cast(tf.not_equal(y, 0), tf.float32)

    return ds.map(add_weights).prefetch(tf.data.AUTOTUNE)
