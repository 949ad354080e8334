"""What a trained language model answers: log-probabilities, scores and perplexity, and one token
at a time (`decode_step`). A part of `LanguageModel` (zoo.models.base), which mixes it in; it
relies on the family's `call`, `step` and `initial_state` and on the output layer `head`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Sequence

import numpy as np
import tensorflow as tf

from zoo.data import pipeline
from zoo.data.corpus import read_lines, scored_words, unknown_share
from zoo.deprecation import warn

if TYPE_CHECKING:
    from zoo.data import CharTokenizer, SubwordTokenizer, WordTokenizer


# A line longer than this many characters is scored alone under mode="sentence" (not padded into
# a batch of 32), through windows where the model's windows are exact (`exact_windows`).
LONG_LINE_CHARS = 10_000
# `score` and `generate` read each text as one sequence: longer ones are refused in one sentence
# (a GCNN's activations for 2^18 tokens of width 512 are half a gigabyte each).
MAX_SEQUENCE_TOKENS = 2**18
# `score` runs texts of similar length together, right-padded, in batches of at most this many
# rows and of rows × longest row tokens (a text longer than that is a batch of its own), fewer
# tokens where the output layer's logits per token would pass SCORE_BATCH_LOGITS (128 MB of them)
SCORE_BATCH_ROWS = 64
SCORE_BATCH_TOKENS = 16_384
SCORE_BATCH_LOGITS = 2**25


def _exp_or_inf(nats: float) -> float:
    """`exp(nats)`, or infinity past the largest float: the perplexity per word of a line whose
    one "word" is thousands of pieces (a long unbroken string) overflows `math.exp`."""
    try:
        return math.exp(nats)
    except OverflowError:
        return math.inf


def check_sequence_length(sequences, what):
    """Refuses a sequence of more than `MAX_SEQUENCE_TOKENS` ids in one sentence."""
    for i, seq in enumerate(sequences):
        if len(seq) > MAX_SEQUENCE_TOKENS:
            raise ValueError(f"{what} {i} is {len(seq):,} tokens long; {what}s are read as one sequence of at most "
                             f"{MAX_SEQUENCE_TOKENS:,} tokens: split it, or score long text with "
                             "perplexity(lines, mode='stream'), which reads any length.")


class Perplexity(float):
    """A perplexity (a float) that also says what it was divided by: `per` ("token" or "word");
    for a closed word vocabulary, `unknown_share`, the share of the words that were `<unk>`
    (None for an open vocabulary); and, when it was computed on lines, the same total in bits per
    UTF-8 byte and per character of the text (`bits_per_byte`, `bits_per_character`; each line's
    end, which the model scores as `</s>`, counts as one byte and one character), figures that
    do not depend on the tokenizer. Its repr shows them, so a notebook shows them."""

    def __new__(cls, value, per="token", unknown_share=None, bits_per_byte=None, bits_per_character=None,
                worst_words_share=None):
        made = super().__new__(cls, value)
        made.per, made.unknown_share = per, unknown_share
        made.bits_per_byte, made.bits_per_character = bits_per_byte, bits_per_character
        made.worst_words_share = worst_words_share
        return made

    def __repr__(self):
        unknown = "" if self.unknown_share is None else f", unknown_share={self.unknown_share:.4f}"
        bits = "" if self.bits_per_byte is None else \
            f", bits_per_byte={self.bits_per_byte:.4f}, bits_per_character={self.bits_per_character:.4f}"
        worst = "" if self.worst_words_share is None else f", worst_words_share={self.worst_words_share:.4f}"
        return f"Perplexity({float(self)!r}, per={self.per!r}{unknown}{bits}{worst})"

    def __reduce__(self):
        return (Perplexity, (float(self), self.per, self.unknown_share, self.bits_per_byte, self.bits_per_character,
                             self.worst_words_share))


WORST_WORDS = 0.01  # the costliest share of the words whose part of the total `Perplexity` reports


def worst_words_share(targets, costs, tokenizer, fraction=WORST_WORDS):
    """The share of the total cost that the costliest `fraction` of the words carry (at least one
    word). `targets` and `costs`: every scored token and its negative log-likelihood, whole lines
    one after the other, each ending in `</s>`; a word is what the tokenizer's `word_index` groups
    (a whitespace word's tokens, and each line's `</s>` on its own)."""
    targets, costs = np.asarray(targets), np.asarray(costs, np.float64)
    ends = np.flatnonzero(targets == tokenizer.eos_id) + 1
    words, start = [], 0
    for end in ends:
        index = np.asarray(tokenizer.word_index([tokenizer.bos_id] + targets[start:end].tolist())[1:])
        words.append(np.bincount(index, weights=costs[start:end]))
        start = end
    if not words or costs.sum() <= 0:
        return None
    per_word = np.sort(np.concatenate(words))[::-1]
    worst = max(1, math.ceil(fraction * len(per_word)))
    return float(per_word[:worst].sum() / per_word.sum())


def score_batches(lengths, rows=None, tokens=None):
    """The batches `score` runs: lists of indices into `lengths`, shortest first, each at most
    `rows` long (default `SCORE_BATCH_ROWS`) and with at most `tokens` (`SCORE_BATCH_TOKENS`) in
    rows × its longest length (a longer one alone).
    A model's log-probability at a position reads only what precedes it, so padding a row on the
    right changes none of its scores; batching only spares the per-call cost (one compiled call,
    and a GCNN's weight norm, per batch instead of per text)."""
    rows = SCORE_BATCH_ROWS if rows is None else rows
    tokens = SCORE_BATCH_TOKENS if tokens is None else tokens
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, batch = [], []
    for i in order:
        if batch and (len(batch) >= rows or (len(batch) + 1) * lengths[i] > tokens):
            batches.append(batch)
            batch = []
        batch.append(i)
    return batches + [batch] if batch else batches


def text_sizes(lines):
    """`(bytes, characters)` of `lines` as a model scores them: each line's UTF-8 bytes and
    characters, plus one of each for its end (scored as `</s>`)."""
    return (sum(len(line.encode("utf-8")) + 1 for line in lines), sum(len(line) + 1 for line in lines))


class Inference:
    """The inference methods of `LanguageModel`: compiled `tf.function`s for the model's work,
    numpy around them."""

    def check_ids(self, token_ids: Sequence | np.ndarray) -> np.ndarray:
        """`token_ids` as an int32 array; empty, non-integer or out-of-vocabulary ids are refused
        in one sentence."""
        ids = np.asarray(token_ids)
        if ids.size == 0:
            raise ValueError("Got an empty sequence of token ids; give at least one token.")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"Token ids must be integers, got dtype {ids.dtype}.")
        bad = ids[(ids < 0) | (ids >= self.vocabulary_size)]
        if bad.size:
            raise ValueError(
                f"Token id {int(bad[0])} is outside the vocabulary: ids must be in "
                f"[0, {self.vocabulary_size - 1}]."
            )
        return ids.astype("int32")

    def require_tokenizer(self) -> WordTokenizer | CharTokenizer | SubwordTokenizer:
        """`self.tokenizer`; a model without one is refused in one sentence."""
        if self.tokenizer is None:
            raise ValueError("This model has no tokenizer: give token ids, or load a preset directory with one.")
        return self.tokenizer

    def require_vocabulary(self) -> WordTokenizer | CharTokenizer | SubwordTokenizer:
        """Deprecated: the former name of `require_tokenizer`."""
        warn("LanguageModel.require_vocabulary()", "LanguageModel.require_tokenizer()")
        return self.require_tokenizer()

    def log_probs(self, token_ids: Sequence | np.ndarray) -> np.ndarray:
        """The log-probability of every token after each position.

        Args:
            token_ids: `<int>[batch, time]` or `<int>[time]` ids in `[0, vocabulary_size)`.

        Returns:
            `<float32>[batch, time, vocabulary_size]` numpy log-probabilities; position t gives
            the distribution of the token after `token_ids[:, t]` (a `[time]` input is a batch
            of one).

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> lm.log_probs([[1, 5, 6]]).shape
        (1, 3, 10002)
        """
        ids = self.check_ids(token_ids)
        if ids.ndim not in (1, 2):
            raise ValueError(
                f"Token ids must be [time] or [batch, time], got an array of shape {ids.shape}."
            )
        if ids.ndim == 1:
            ids = ids[None]
        return self._log_probs_fn(tf.constant(ids)).numpy()

    @tf.function(reduce_retracing=True)
    def _log_probs_fn(self, ids):
        return self.head.log_prob(self(ids, training=False))

    def target_log_probs(self, inputs: Sequence | np.ndarray, targets: Sequence | np.ndarray) -> np.ndarray:
        """The log-probabilities of `targets` given `inputs`, in one compiled call for the whole
        batch.

        Args:
            inputs: `<int>[batch, time]` ids.
            targets: `<int>[batch, time]` ids of the same shape; target t is the token after
                input t.

        Returns:
            `<float32>[batch, time]` numpy log-probabilities, one per target.

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> lp = lm.target_log_probs([[1, 5]], [[5, 6]])
        >>> lp.shape, lp.dtype, bool((lp < 0).all())
        ((1, 2), dtype('float32'), True)
        """
        inputs, targets = self.check_ids(inputs), self.check_ids(targets)
        if inputs.ndim != 2 or inputs.shape != targets.shape:
            raise ValueError(f"inputs and targets must both be [batch, time] with the same shape, got "
                             f"{inputs.shape} and {targets.shape}.")
        return self._target_log_prob_fn(tf.constant(inputs), tf.constant(targets)).numpy()

    @tf.function(reduce_retracing=True)
    def _target_log_prob_fn(self, ids, targets):
        return self.head.target_log_prob(self(ids, training=False), targets)

    def score(self, texts_or_ids: str | Sequence[str] | Sequence[Sequence[int]] | np.ndarray) -> list[np.ndarray]:
        """The log-probability of each actual next word (or token).

        Args:
            texts_or_ids: a string or a list of strings, read with the model's tokenizer (each
                wrapped in `<s> … </s>`); or ids: a list of id lists or an `<int>[batch, time]`
                array, or one flat list (or 1-D array) of ids, scored as one row.

        Returns:
            One `<float32>[n]` numpy array per text or row. For a text: the log-probabilities
            of `w1 … wn </s>`, one per whitespace-separated word of the text (after the
            tokenizer's normalisation) and one for `</s>`; with a subword tokenizer a word's
            log-probability is the sum over its pieces, with a word or character tokenizer
            each token is scored as it is. For ids: per row, the log-probabilities of tokens
            1 … n-1 given what precedes them.

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> [scores.shape for scores in lm.score(["the company said it would buy the stock", "a dog"])]
        [(9,), (3,)]
        """
        if isinstance(texts_or_ids, str):
            texts_or_ids = [texts_or_ids]
        if not isinstance(texts_or_ids, Iterable) or isinstance(texts_or_ids, (bytes, dict)):
            raise ValueError(f"score takes a string, a list of strings, a list of ids or a list of id lists, got "
                             f"{type(texts_or_ids).__name__}.")
        items = list(texts_or_ids)
        if any(isinstance(i, str) for i in items) and not all(isinstance(i, str) for i in items):
            raise ValueError("score was given strings mixed with ids: give a list of strings or a list of id lists.")
        if items and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items):
            items = [items]  # one flat list of ids: one row, as `generate` reads it
        tokenizer = None
        if items and isinstance(items[0], str):
            tokenizer = self.require_tokenizer()
            sequences = tokenizer.encode_batch(items)
        else:
            sequences = [list(self.check_ids(s).reshape(-1)) for s in items]
        check_sequence_length(sequences, "text")
        for row, seq in enumerate(sequences):
            if len(seq) < 2:
                raise ValueError(f"Row {row} has {len(seq)} token{'' if len(seq) == 1 else 's'}; a sequence to score "
                                 "needs at least two (a context and a target).")
        out = [None] * len(sequences)
        cutoffs = getattr(self.head, "cutoffs", None)  # an adaptive softmax computes its head's logits for all
        width = cutoffs[0] + len(cutoffs) if cutoffs else self.vocabulary_size
        tokens = max(1, min(SCORE_BATCH_TOKENS, SCORE_BATCH_LOGITS // width))
        for rows in score_batches([len(seq) - 1 for seq in sequences], tokens=tokens):
            longest = len(sequences[rows[-1]]) - 1  # rows come shortest first
            ids = np.zeros([len(rows), longest], np.int32)  # <pad> after each row's end: nothing before reads it
            targets = np.zeros([len(rows), longest], np.int32)
            for i, row in enumerate(rows):
                seq = sequences[row]
                ids[i, :len(seq) - 1], targets[i, :len(seq) - 1] = seq[:-1], seq[1:]
            log_probs = self._target_log_prob_fn(tf.constant(ids), tf.constant(targets)).numpy()
            for i, row in enumerate(rows):
                out[row] = log_probs[i, :len(sequences[row]) - 1]
        if tokenizer is not None and tokenizer.scores_per_word:
            for row, seq in enumerate(sequences):
                words = np.asarray(tokenizer.word_index(seq)[1:])  # the word of each target
                out[row] = np.bincount(words, weights=out[row], minlength=words.max() + 1).astype("float32")
        return out

    def perplexity(self, data: Sequence[str] | str | tf.data.Dataset, mode: str = "stream", batch_size: int = 32,
                   seq_len: int = 128, split: str | None = None, per: str = "token",
                   context: int | None = None) -> Perplexity:
        """Perplexity `exp(total NLL / N)`, as the papers compute it (§4.1).

        Args:
            data: a list of lines (read with the model's tokenizer), a corpus name or path for
                `zoo.data.read_lines` (with `split`), or a `tf.data.Dataset` of
                `(<int32>[batch, time] inputs, <int32>[batch, time] targets,
                <float32>[batch, time] sample_weight)` batches.
            mode: for lines, "sentence" scores each line alone, "stream" their concatenation in
                windows of `seq_len` with `context` tokens of left context each.
            batch_size: rows per batch, for lines.
            seq_len: tokens per window under mode="stream".
            split: the split of a corpus name or path ("valid" when None).
            per: "token": N is the number of scored tokens (the papers' figure for a word
                model); "word": N is the number of whitespace-separated words plus one `</s>`
                per line (`zoo.data.corpus.scored_words`), whatever the tokenizer, so that word,
                character and subword models are comparable (it needs lines). For a word
                tokenizer the two are equal.
            context: tokens of unscored left context per stream window; None: the model's
                `stream_context` (for a GCNN its receptive field, so every target is scored
                exactly as in one whole-stream call). fairseq's `eval_lm --tokens-per-sample T
                --context-window C` is `seq_len=T - C, context=C` (docs/using-the-authors-weights.md).

        Returns:
            A `Perplexity` (a float). With lines, its `bits_per_byte` and `bits_per_character`
            give the same total over the text's UTF-8 bytes and characters (`text_sizes`),
            figures that do not depend on the tokenizer, and its `worst_words_share` the share of
            the total that the costliest 1% of the words carry (a separator line or a symbol run
            can be one costly "word"). With lines and a closed word vocabulary,
            its `unknown_share` is the share of the words read as `<unk>`: each is scored as that
            one easy token, so a word model's figure is lower than an open-vocabulary model's
            would be on the same text, the more so the larger the share
            (docs/data-and-tokenizers.md).

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> ppl = lm.perplexity(["the company said it would buy the stock"], mode="sentence")
        >>> ppl.per, ppl.unknown_share, 1 < ppl < 10002
        ('token', 0.0, True)
        """
        if mode not in ("sentence", "stream"):
            raise ValueError(f"Unknown mode {mode!r}; expected 'sentence' or 'stream'.")
        if per not in ("token", "word"):
            raise ValueError(f"Unknown per={per!r}; expected 'token' or 'word'.")
        if per == "word" and isinstance(data, tf.data.Dataset):
            raise ValueError("per='word' needs the lines (a list of strings or a corpus name), not a "
                             "tf.data.Dataset: words are counted on the text.")
        if context is None:
            context = self.stream_context
        if isinstance(context, bool) or not isinstance(context, (int, np.integer)) or context < 0:
            raise ValueError(f"context must be a whole number of tokens >= 0 (or None: the model's stream_context), "
                             f"got {context!r}.")
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 1:
            raise ValueError(f"seq_len must be a whole number of tokens >= 1, got {seq_len!r}.")
        if isinstance(data, str):
            data = read_lines(data, split or "valid")
        if isinstance(data, tf.data.Dataset):
            datasets = [data]
        else:
            lines = list(data)
            if not lines:
                raise ValueError("Nothing to evaluate: the list of lines is empty.")
            vocab = self.require_tokenizer()
            if mode == "stream":
                datasets = [pipeline.stream_dataset(lines, vocab, batch_size, seq_len, context=int(context))]
            else:
                datasets = self._sentence_datasets(lines, vocab, batch_size, seq_len)
        with_text = not isinstance(data, tf.data.Dataset)  # lines: the figures per byte and per word too
        total, count, targets, costs = 0.0, 0.0, [], []
        for x, y, w in (batch for d in datasets for batch in d):
            lp = self._target_log_prob_fn(x, y)
            w = tf.cast(w, tf.float32)
            total -= float(tf.reduce_sum(tf.cast(lp, tf.float32) * w))
            count += float(tf.reduce_sum(w))
            if with_text:
                scored = w.numpy() > 0  # whole lines in order: a sentence row, or a stream's windows
                targets.append(y.numpy()[scored])
                costs.append(-tf.cast(lp, tf.float32).numpy()[scored])
        if count == 0:
            raise ValueError("Nothing to evaluate: no token has a non-zero weight.")
        if per == "word":
            count = scored_words(lines)
        if not with_text:
            return Perplexity(_exp_or_inf(total / count), per)
        size, characters = text_sizes(lines)
        bits = total / math.log(2)
        worst = worst_words_share(np.concatenate(targets), np.concatenate(costs), self.tokenizer)
        return Perplexity(_exp_or_inf(total / count), per, unknown_share(lines, self.tokenizer), bits / size,
                          bits / characters, worst)

    def _sentence_datasets(self, lines, vocab, batch_size, seq_len):
        """Each line alone: the short ones in padded batches, each line of more than
        `LONG_LINE_CHARS` characters on its own, through windows of `seq_len` with the model's
        `stream_context` where those are exact (`exact_windows`: a GCNN's context covers its
        receptive field), else as one sequence of a batch of one."""
        short = [line for line in lines if len(line) <= LONG_LINE_CHARS]
        datasets = [pipeline.sentence_dataset(short, vocab, batch_size)] if short else []
        for line in lines:
            if len(line) > LONG_LINE_CHARS:
                if getattr(self, "exact_windows", False):
                    datasets.append(pipeline.stream_dataset([line], vocab, batch_size, seq_len,
                                                            context=self.stream_context))
                else:
                    datasets.append(pipeline.sentence_dataset([line], vocab, 1))
        return datasets

    def decode_step(self, token_ids: Sequence[int] | np.ndarray, state: list | None = None) -> tuple[tf.Tensor, list]:
        """One token per sequence: feeding a sequence token by token gives what `log_probs`
        gives for the whole sequence.

        Args:
            token_ids: `<int>[batch]`, the next token of each sequence.
            state: the state the previous call returned (a nested list of tensors, batch
                first: the family's `initial_state`); None starts from the beginning.

        Returns:
            `(log_probs, state)`: `<float32>[batch, vocabulary_size]` log-probabilities of the
            token after `token_ids` (a `tf.Tensor`) and the state to pass to the next call.

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> log_probs, state = lm.decode_step([1, 1])
        >>> log_probs.shape, log_probs.dtype.name
        (TensorShape([2, 10002]), 'float32')
        """
        ids = self.check_ids(token_ids).reshape(-1)
        if state is None:
            state = self.initial_state(len(ids))
        return self._decode_fn(tf.constant(ids), state)

    @tf.function(reduce_retracing=True)
    def _decode_fn(self, ids, state):
        hidden, state = self.step(ids, state)
        return self.head.log_prob(hidden), state
