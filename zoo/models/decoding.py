"""The pieces of a decoding loop that every sampler's loop shares: reading the prompt (`prefill`),
the output layer's scores, the rules every row follows (`Rules`: where it stops, what it never
writes, the n-grams it never repeats) and the output layer in blocks.

The loops themselves belong to the samplers (`zoo.models.samplers`: `Sampler.__call__`, which
beam search overrides), and `zoo.models.generation` decides, in Python on the machine that runs
the model, how a loop is laid out there (groups of rows, the output layer's blocks). This module
imports neither, so that both can import it.
"""

import contextlib
import dataclasses

import numpy as np
import tensorflow as tf

PAD_ID, BOS_ID = 0, 1  # never emitted
NO_STOP = -1  # an `eos_id` no token equals: rows end at max_new_tokens only
GROUP_FROM = 8  # a loop laid out in groups of rows splits a batch of at least this many rows
GROUP_SEED = 1_000_003  # group g draws with seed + g * GROUP_SEED


@dataclasses.dataclass(frozen=True)
class Rules:
    """What every row of a decoding loop follows, whichever sampler chooses: it stops after
    `eos_id` or one of `stop_sequences` (tuples of ids), never writes the ids of `never` (their
    scores are −inf; `<pad>` and `<s>` by default) and, with `ngram` > 0, never repeats an n-gram
    of its prompt and output."""

    eos_id: int = NO_STOP
    stop_sequences: tuple = ()
    ngram: int = 0
    never: tuple = (PAD_ID, BOS_ID)


# ---- the prompt ------------------------------------------------------------------------------------
def _provider(cls, name):
    return next((klass for klass in cls.__mro__ if name in klass.__dict__), None)


def reads_prompt_in_parallel(model):
    """Whether the family's `prefill` applies: it must come from the class that defines `step`
    (or a subclass of it), so that a subclass changing `step` alone decodes as its `step` does."""
    cls = type(model)
    prefill, step = _provider(cls, "prefill"), _provider(cls, "step")
    return prefill is not None and issubclass(prefill, step)


def prefill(model, token_ids, lengths):
    """`(hidden [batch, hidden_dim] at each row's last prompt token, decoding state after it)`
    for right-padded prompts `token_ids` [batch, time] with `lengths` [batch] (each ≥ 1)."""
    if reads_prompt_in_parallel(model):
        return model.prefill(token_ids, lengths)
    return stepwise_prefill(model, token_ids, lengths)


def stepwise_prefill(model, token_ids, lengths):
    """`prefill` by feeding the prompts to `step` token by token (in one `tf.while_loop`), a row's
    state frozen past its length: for families without a parallel `prefill`, and the reference
    the parallel ones are tested against."""
    batch = tf.shape(token_ids)[0]
    state = model.initial_state(batch)
    hidden = tf.zeros([batch, model.hidden_dim], model.compute_dtype)

    def body(t, hidden, state):
        new_hidden, new_state = model.step(token_ids[:, t], state)
        live = t < lengths
        keep = lambda new, old: tf.where(tf.reshape(live, [-1] + [1] * (len(old.shape) - 1)), new, old)
        return t + 1, keep(new_hidden, hidden), tf.nest.map_structure(keep, new_state, state)

    _, hidden, state = tf.while_loop(lambda t, *_: t < tf.reduce_max(lengths), body, (0, hidden, state))
    return hidden, state


def prompt_buffer(token_ids, room):
    """The loop's ids: the right-padded prompts and `room` columns of `<pad>` after them."""
    return tf.pad(token_ids, [[0, 0], [0, room]], constant_values=PAD_ID)


# ---- the rules every row follows -------------------------------------------------------------------
def repeated_ngrams(buffer, ends, n, vocabulary_size):
    """[batch, vocabulary] bool: the tokens that would complete, at position `ends[b]`, an n-gram
    already present in `buffer[b, :ends[b]]` (fairseq's no-repeat n-gram rule, prompt included)."""
    batch, width = tf.shape(buffer)[0], tf.shape(buffer)[1]
    starts = tf.maximum(width - n + 1, 0)  # candidate n-gram start positions j
    prefix = tf.gather(buffer, tf.maximum(ends[:, None] - (n - 1) + tf.range(n - 1)[None, :], 0), batch_dims=1)
    match = tf.range(starts)[None, :] + n - 1 < ends[:, None]  # n-gram j lies wholly before ends
    match &= ends[:, None] >= n - 1
    for i in range(n - 1):
        match &= tf.equal(buffer[:, i:i + starts], prefix[:, i:i + 1])
    following = buffer[:, n - 1:n - 1 + starts]
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(following))
    indices = tf.reshape(tf.stack([rows, following], axis=-1), [-1, 2])
    hits = tf.reshape(tf.cast(match, tf.int32), [-1])
    return tf.scatter_nd(indices, hits, [batch, vocabulary_size]) > 0


def stopped(buffer, ends, lengths, stop_sequences):
    """[batch] bool: the new tokens of a row (positions `lengths … ends − 1`) end with one of
    `stop_sequences` (tuples of ids)."""
    done = tf.zeros_like(ends, tf.bool)
    for sequence in stop_sequences:
        m = len(sequence)
        window = tf.gather(buffer, tf.maximum(ends[:, None] - m + tf.range(m)[None, :], 0), batch_dims=1)
        done |= tf.reduce_all(tf.equal(window, tf.constant(sequence, tf.int32)[None, :]), axis=1) \
            & (ends - m >= lengths)
    return done


def never_scores_of(ids, vocabulary_size):
    """float32 [vocabulary]: 0 for every id but `ids`, −inf for those; added to each step's scores
    (one addition instead of a select against a mask, and exact: x + 0 = x). Made once before a
    decoding loop, by a scatter rather than held as a constant (a vocabulary-sized constant in
    each traced loop would weigh on every export)."""
    return tf.tensor_scatter_nd_update(tf.zeros([vocabulary_size], tf.float32), [[i] for i in ids],
                                       tf.fill([len(ids)], tf.constant(-np.inf, tf.float32)))


def banned(log_probs, never, buffer, ends, ngram):
    """`log_probs` with the ids no row may write at −inf: `never` (`never_scores_of`'s) and, with
    `ngram` > 0, those that would repeat an n-gram."""
    log_probs = log_probs + never[None, :]
    if ngram:
        log_probs = tf.where(repeated_ngrams(buffer, ends, ngram, log_probs.shape[-1]), -np.inf, log_probs)
    return log_probs


# ---- the output layer ------------------------------------------------------------------------------
def next_token_scores(model, hidden, normalised):
    """The output layer's scores of the next token, float32 [batch, vocabulary]: log-probabilities
    when `normalised` (beam search adds them up), else anything equal to them up to a constant per
    row (a full softmax's logits: greedy and sampling need no normalisation)."""
    head = model.head
    if not normalised and hasattr(head, "logits") and not hasattr(head, "cutoffs"):
        return tf.cast(head.logits(hidden), tf.float32)
    return tf.cast(head.log_prob(hidden), tf.float32)


def in_blocks(model, blocks):
    """While a loop is traced: a full or tied output layer as `blocks` products over blocks of ids,
    computed once before the loop (`FullSoftmax.blocks_computed_once`); nothing at 1. How many
    suits a machine is `zoo.models.generation.head_blocks`' choice, made by the loop's caller."""
    if blocks > 1 and hasattr(model.head, "blocks_computed_once"):
        return model.head.blocks_computed_once(blocks)
    return contextlib.nullcontext()
