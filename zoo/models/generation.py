"""Generating text: `LanguageModel.generate`, a part of `LanguageModel` (zoo.models.base), which
mixes it in, and the in-graph decoding loop that it and the exported `generate` signature
(`zoo.export.signatures`) both run.

A batch of prompts of any lengths is right-padded; the model reads every prompt in one parallel
pass (`prefill`: the GCNN's convolutions over all positions at once, each conv layer's state
gathered at each row's length; the recurrent stack's layers run once over the prompt, masked past
each row's end) and then one `tf.while_loop` produces every new token: `step`, the output layer,
the sampler, the stop checks, all in the graph, with no Python per token. Rows that have stopped
write `<pad>` while the others go on; the loop ends when every row has stopped.
"""

import contextlib
import numbers
import os

import numpy as np
import tensorflow as tf

from zoo.layers import int8
from zoo.layers.validation import plain
from zoo.models import samplers
# A sampler owns its choice; the arithmetic the samplers share stays importable from here too.
from zoo.models.samplers import BLOCK, candidates, draw, greedy_choice, sample_tokens, top_k_of  # noqa: F401
from zoo.models.inference import check_sequence_length

PAD_ID, BOS_ID = 0, 1  # never emitted
NO_STOP = -1  # an `eos_id` no token equals: rows end at max_new_tokens only
MAX_NEW_TOKENS = 1 << 20  # the most `generate` writes a row (its buffer is allocated up front)
# The output layer's blocks in a graph loop for a few rows (head_blocks): by default as many as
# make each block fill at most CACHE_FILL of a core's level-2 cache, one product where that would
# take more than MAX_AUTO_HEAD_BLOCKS or the cache is unknown.
CACHE_FILL = 0.9
MAX_AUTO_HEAD_BLOCKS = 16
MAX_HEAD_BLOCKS = 64  # the most blocks an export may be asked for (zoo export --head-blocks)
CPU_CACHE = "/sys/devices/system/cpu/cpu0/cache"


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


# ---- choosing a token ------------------------------------------------------------------------------

def served_sampler(temperature, top_k, top_p):
    """The exported `generate` signature's token chooser, its settings as tensors (`Served`)."""
    return samplers.Served(temperature, top_k, top_p).next


def _traced_sampler(sampler, temperature, top_p):
    """`sampler` inside a compiled loop: its dynamic parameters (`Sampler.dynamic`) replaced by the
    loop's `temperature` and `top_p` tensors, so a new value needs no new trace or compilation."""
    fed = {"temperature": temperature, "p": top_p}
    return sampler.bound(**{name: fed[name] for name in sampler.dynamic if name in fed})


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


def next_token_scores(model, hidden, normalised):
    """The output layer's scores of the next token, float32 [batch, vocabulary]: log-probabilities
    when `normalised` (beam search adds them up), else anything equal to them up to a constant per
    row (a full softmax's logits: greedy and sampling need no normalisation)."""
    head = model.head
    if not normalised and hasattr(head, "logits") and not hasattr(head, "cutoffs"):
        return tf.cast(head.logits(hidden), tf.float32)
    return tf.cast(head.log_prob(hidden), tf.float32)


@contextlib.contextmanager
def loop_invariants(model):
    """While a decoding loop is traced: what does not change from token to token (an int8
    model's dequantized weights, the GCNN's weight-normalised kernels) is computed once, before
    the loop, where the family says how (its `loop_invariants()` context manager)."""
    hook = getattr(model, "loop_invariants", None)
    with int8.dequantized_once(model), (hook() if hook is not None else contextlib.nullcontext()):
        yield


def l2_cache_bytes(root=CPU_CACHE):
    """A core's level-2 (data or unified) cache in bytes, as Linux describes the first CPU under
    `root`; None where it does not (another system, a container hiding it)."""
    try:
        for index in sorted(os.listdir(root)):
            folder = os.path.join(root, index)
            if not index.startswith("index"):
                continue
            with open(os.path.join(folder, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(folder, "type")) as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Data", "Unified"):
                with open(os.path.join(folder, "size")) as f:
                    size = f.read().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        return None
    return None


def head_blocks(model, blocks=None):
    """How many products over blocks of ids the output layer runs as in a graph loop for fewer
    than `GROUP_FROM` rows (`FullSoftmax.blocks_computed_once`): `blocks` if given, 1 for a layer
    that has no blocks (the adaptive softmax), else the fewest blocks that each fit `CACHE_FILL`
    of this machine's level-2 cache per core: on the CPUs measured, one row's product slows down
    once its matrix outgrows that cache, and blocks that fit it, run side by side on the cores,
    are faster (results/benchmarks/served-generate.md). 1 (the one product) where the cache is
    unknown or more than `MAX_AUTO_HEAD_BLOCKS` would be needed."""
    fit = getattr(model.head, "blocks_to_fit", None)  # a full or tied layer
    if fit is None:
        return 1
    if blocks is not None:
        return min(blocks, model.head.vocabulary_size)
    cache = l2_cache_bytes()
    if cache is None:
        return 1
    blocks = fit(cache * CACHE_FILL)
    return blocks if blocks <= MAX_AUTO_HEAD_BLOCKS else 1


def _head_in_blocks(model, blocks):
    """While a graph loop for a few rows is traced: the output layer in `head_blocks(model,
    blocks)` blocks, computed once before the loop (nothing where that is 1)."""
    blocks = head_blocks(model, blocks)
    return model.head.blocks_computed_once(blocks) if blocks > 1 else contextlib.nullcontext()


def never_emitted(model):
    """The ids a decoding loop never emits: `<pad>` and `<s>`, and a subword tokenizer's `<unk>`,
    which no text encodes to (byte fallback spells every character) but a lightly trained model
    may still give some probability (a new user saw " ⁇ " in generated text)."""
    tokenizer = getattr(model, "tokenizer", None)
    extra = [] if tokenizer is None else [int(i) for i in tokenizer.never_encoded]
    return [PAD_ID, BOS_ID] + [i for i in extra if i not in (PAD_ID, BOS_ID) and i < model.vocabulary_size]


def never_scores(model):
    """float32 [vocabulary]: 0 for every id but `never_emitted(model)`'s, −inf for those; added to
    each step's scores (one addition instead of a select against a mask, and exact: x + 0 = x).
    Made once before a decoding loop, by a scatter rather than held as a constant (a
    vocabulary-sized constant in each traced loop would weigh on every export)."""
    ids = never_emitted(model)
    return tf.tensor_scatter_nd_update(tf.zeros([model.vocabulary_size], tf.float32), [[i] for i in ids],
                                       tf.fill([len(ids)], tf.constant(-np.inf, tf.float32)))


def _banned(log_probs, never, buffer, ends, ngram):
    log_probs = log_probs + never[None, :]
    if ngram:
        log_probs = tf.where(repeated_ngrams(buffer, ends, ngram, log_probs.shape[-1]), -np.inf, log_probs)
    return log_probs


def _prompt_buffer(token_ids, max_new_tokens):
    return tf.pad(token_ids, [[0, 0], [0, max_new_tokens]], constant_values=PAD_ID)


# ---- the loops -------------------------------------------------------------------------------------
GROUPS = 2  # a batch of at least GROUP_FROM rows decodes as this many independent groups of rows
GROUP_FROM = 8
GROUP_SEED = 1_000_003  # group g draws with seed + g * GROUP_SEED


def decode(model, token_ids, lengths, max_new_tokens, choose, seed, eos_id, stop_sequences=(), ngram=0,
           with_log_prob=False, groups=GROUPS, room=None, head_blocks=None):
    """Up to `max_new_tokens` new tokens after each right-padded prompt, chosen by
    `choose(scores, seed, step)`; a row stops after `eos_id` or a stop sequence. Returns
    `(ids [batch, time + max_new_tokens], ends [batch])`: row b's prompt and new tokens are
    `ids[b, :ends[b]]`, the rest `<pad>`; and, `with_log_prob`, the new tokens' log-probability
    [batch] (the scores then being normalised log-probabilities). `room`: the columns the ids get
    after the prompts, a Python int ≥ `max_new_tokens` (XLA needs static shapes), else
    `max_new_tokens` itself. `head_blocks`: the output layer's blocks of ids at fewer than
    `GROUP_FROM` rows (`head_blocks`; None: this machine's choice).

    A batch of `GROUP_FROM` rows or more is split into `groups` groups (the first rows, then the
    rest) that one loop decodes side by side: their ops are independent, so TensorFlow's executor
    runs one group's small ops while the other's run (`zoo benchmark generate`: 1.3× at 32 rows
    on 2 cores). Group g draws with seed `seed + g · GROUP_SEED`, so a row's draws depend on the
    seed, its index in the batch and the batch size, never on the other rows' text."""
    lengths = tf.cast(lengths, tf.int32)
    hidden, state = prefill(model, token_ids, lengths)
    buffer = _prompt_buffer(token_ids, max_new_tokens if room is None else room)
    batch = tf.shape(lengths)[0]
    seed = tf.cast(seed, tf.int64)

    def run(bounds):
        parts = [(lambda x, a=a, b=b: x[a:b]) for a, b in bounds]
        groups = [[tf.zeros_like(part(lengths), tf.bool), part(lengths), part(buffer), tf.zeros(tf.shape(part(lengths))),
                   part(hidden), tf.nest.map_structure(part, state)] for part in parts]
        bodies = [_decode_body(model, part(lengths), choose, seed + g * GROUP_SEED, eos_id, stop_sequences, ngram,
                               with_log_prob) for g, part in enumerate(parts)]

        def body(step, groups):
            return step + 1, [list(b(step, *group)) for b, group in zip(bodies, groups)]

        def keep_going(step, groups):
            return (step < max_new_tokens) & ~tf.reduce_all(tf.concat([group[0] for group in groups], 0))

        _, groups = tf.while_loop(keep_going, body, (tf.constant(0), groups))
        return tuple(tf.concat([group[i] for group in groups], 0) for i in (2, 1, 3))  # buffer, ends, total

    if groups > 1:
        cut = [batch * g // groups for g in range(groups + 1)]
        def few_rows():
            with _head_in_blocks(model, head_blocks):
                return run([(0, batch)])

        buffer, ends, total = tf.cond(batch >= GROUP_FROM, lambda: run(list(zip(cut[:-1], cut[1:]))), few_rows)
    else:
        buffer, ends, total = run([(0, batch)])
    return (buffer, ends, total) if with_log_prob else (buffer, ends)


def _decode_body(model, lengths, choose, seed, eos_id, stop_sequences, ngram, with_log_prob):
    """One step of `decode` for one group of rows: `(done, ends, buffer, total, hidden, state)`
    after the next token."""
    rows = tf.range(tf.shape(lengths)[0])

    never = never_scores(model)

    def body(step, done, ends, buffer, total, hidden, state):
        log_probs = _banned(next_token_scores(model, hidden, normalised=with_log_prob), never, buffer, ends, ngram)
        token = tf.where(done, PAD_ID, choose(log_probs, seed, step))
        if with_log_prob:
            total += tf.where(done, 0.0, tf.gather(log_probs, token, batch_dims=1))
        buffer = tf.tensor_scatter_nd_update(buffer, tf.stack([rows, ends], axis=1), token)
        ends += tf.cast(~done, tf.int32)
        done |= tf.equal(token, eos_id) | stopped(buffer, ends, lengths, stop_sequences)
        hidden, state = model.step(token, state)
        return done, ends, buffer, total, hidden, state

    return body


def beam_search(model, token_ids, lengths, max_new_tokens, num_beams, length_penalty, eos_id,
                stop_sequences=(), ngram=0, against_greedy=True, sampler=None, all_beams=False):
    """Beam search: `num_beams` hypotheses per prompt, each extended by every token and the best
    `num_beams` of all kept (by log-probability); a finished hypothesis (after `eos_id` or a stop
    sequence) stays as it is. At the end each prompt's hypotheses are ranked by
    `log-probability / new tokens ** length_penalty`, together with the greedy one (decoded beside
    them): beam search can lose the greedy hypothesis on the way, and never returns anything
    ranked below it. Returns `decode`'s `(ids, ends)` for the best hypothesis of each prompt, and
    its log-probability [batch]. `all_beams=True` returns every beam instead, best first within
    each prompt (the greedy hypothesis not added): `(ids [batch·n, width], ends [batch·n],
    log-probabilities [batch·n], ranking scores [batch·n])`."""
    beams = sampler if sampler is not None else samplers.Beam(num_beams, length_penalty)
    lengths = tf.cast(lengths, tf.int32)
    hidden, state = prefill(model, token_ids, lengths)
    batch, n = tf.shape(lengths)[0], num_beams
    def tile(x):  # each row n times; the static shape kept (n may be a request's tensor)
        return tf.ensure_shape(tf.repeat(x, n, axis=0), [None] + x.shape[1:])

    hidden, state = tile(hidden), tf.nest.map_structure(tile, state)
    buffer, lengths = tile(_prompt_buffer(token_ids, max_new_tokens)), tile(lengths)
    # only the first beam of each prompt is live at the start: the others would repeat it
    scores = tf.tile(tf.concat([[0.0], tf.fill([n - 1], -np.inf)], 0)[None, :], [batch, 1])
    vocabulary_size = model.vocabulary_size
    finished_row = tf.where(tf.range(vocabulary_size) == PAD_ID, 0.0, -np.inf)[None, :]
    rows = tf.range(batch * n)
    first_beam = tf.repeat(tf.range(batch) * n, n)

    never = never_scores(model)

    def body(step, done, ends, buffer, scores, hidden, state):
        log_probs = _banned(next_token_scores(model, hidden, normalised=True), never, buffer, ends, ngram)
        log_probs = tf.where(done[:, None], finished_row, log_probs)
        total = tf.reshape(tf.reshape(scores, [-1, 1]) + log_probs, [batch, n * vocabulary_size])
        scores, best = beams.select(total)
        origin = tf.reshape(best // vocabulary_size, [-1]) + first_beam
        token = tf.reshape(best % vocabulary_size, [-1])
        pick = lambda x: tf.gather(x, origin)
        done, ends, buffer = pick(done), pick(ends), pick(buffer)
        hidden, state = pick(hidden), tf.nest.map_structure(pick, state)
        buffer = tf.tensor_scatter_nd_update(buffer, tf.stack([rows, ends], axis=1), token)
        ends += tf.cast(~done, tf.int32)
        done |= tf.equal(token, eos_id) | stopped(buffer, ends, lengths, stop_sequences)
        hidden, state = model.step(token, state)
        return step + 1, done, ends, buffer, scores, hidden, state

    keep_going = lambda step, done, *_: (step < max_new_tokens) & ~tf.reduce_all(done)
    loop = (tf.constant(0), tf.zeros_like(lengths, tf.bool), lengths, buffer, scores, hidden, state)
    _, _, ends, buffer, scores, _, _ = tf.while_loop(keep_going, body, loop)
    if all_beams:
        return _ranked_beams(beams, buffer, ends, scores, lengths, batch, n, every=True)
    ids, ends, score, ranked_best = _ranked_beams(beams, buffer, ends, scores, lengths, batch, n)
    if not against_greedy:  # the beams alone (tests)
        return ids, ends, score
    prompt_lengths = tf.reshape(lengths[::n], [-1])  # a rank the stride of a request's beams leaves unknown
    g_ids, g_ends, g_score = decode(model, token_ids, prompt_lengths, max_new_tokens, greedy_choice, 0, eos_id,
                                    stop_sequences, ngram, with_log_prob=True)
    g_ranked = beams.rank(g_score, tf.cast(tf.maximum(g_ends - prompt_lengths, 1), tf.float32))
    greedy_wins = g_ranked > ranked_best
    return (tf.where(greedy_wins[:, None], g_ids, ids), tf.where(greedy_wins, g_ends, ends),
            tf.where(greedy_wins, g_score, score))


def _ranked_beams(beams, buffer, ends, scores, lengths, batch, n, every=False):
    """The beams ranked by `beams.rank` (log-probability / new tokens ** length_penalty): the best
    of each prompt, `(ids, ends, log-probability, ranking score)`, or with `every` all of them,
    best first within each prompt (`beam_search`'s `all_beams`)."""
    new = tf.reshape(tf.cast(tf.maximum(ends - lengths, 1), tf.float32), [batch, n])
    ranked = beams.rank(scores, new)
    if every:
        order = tf.reshape(tf.argsort(ranked, axis=1, direction="DESCENDING", stable=True)
                           + tf.range(batch)[:, None] * n, [-1])
        return (tf.gather(buffer, order), tf.gather(ends, order), tf.gather(tf.reshape(scores, [-1]), order),
                tf.gather(tf.reshape(ranked, [-1]), order))
    best = tf.argmax(ranked, axis=1, output_type=tf.int32)
    ranked_best = tf.gather(ranked, best, batch_dims=1)
    best += tf.range(batch) * n
    return (tf.gather(buffer, best), tf.gather(ends, best), tf.gather(tf.reshape(scores, [-1]), best),
            ranked_best)


def compiled(model, sampler, ngram, stop_sequences, eos_id, jit_compile, room=None, all_beams=False):
    """The compiled generation function of `model` for one static configuration, made once and
    kept on the model: `fn(token_ids, lengths, max_new_tokens, seed, temperature, top_p)`.

    With `jit_compile`, a batch of `GROUP_FROM` rows or more is cut into `GROUPS` groups, each
    decoded by its own XLA-compiled loop, the loops launched side by side from one graph (one XLA
    computation runs its ops one after the other; two run at once on two cores). Group g draws
    with seed `seed + g · GROUP_SEED`, as the graph loop's groups do."""
    functions = model.__dict__.setdefault("_generation_functions", {})
    key = (sampler.static_key(), ngram, stop_sequences, eos_id, jit_compile, room, all_beams)
    if key in functions:
        return functions[key]
    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float32),
            tf.TensorSpec([], tf.float32)]
    beam = sampler.is_search
    if beam:
        def run(token_ids, lengths, max_new_tokens, seed, temperature, top_p):
            return beam_search(model, token_ids, lengths, max_new_tokens, sampler.num_beams, sampler.length_penalty,
                               eos_id, stop_sequences, ngram, sampler=sampler, all_beams=all_beams)
    else:
        def run(token_ids, lengths, max_new_tokens, seed, temperature, top_p):
            choose = _traced_sampler(sampler, temperature, top_p).next
            ids, ends = decode(model, token_ids, lengths, max_new_tokens, choose, seed, eos_id, stop_sequences, ngram,
                               groups=1 if jit_compile else GROUPS, room=room)
            return ids, ends, tf.zeros(tf.shape(ends), tf.float32)
    function = tf.function(_Traced(model, run), input_signature=spec, autograph=False, jit_compile=jit_compile)
    if jit_compile and not beam:
        function = tf.function(_Groups(function), input_signature=spec, autograph=False)
    functions[key] = function
    return function


class _Traced:
    """`run` traced with the model's loop invariants computed once (the mixtures of experts'
    balance metrics are not updated: `step` and `prefill` never track them). An object rather than a closure: tf.function counts
    traces per code object, and every configuration traces once, which closures sharing one code
    object would report as retracing."""

    def __init__(self, model, run):
        self.model, self.run = model, run

    def __call__(self, *args):
        with loop_invariants(self.model):
            return self.run(*args)


class _Groups:
    """`function` (an XLA-compiled generation loop) on `GROUPS` groups of a batch's rows at once."""

    def __init__(self, function):
        self.function = function

    def __call__(self, token_ids, lengths, max_new_tokens, seed, temperature, top_p):
        batch = tf.shape(lengths)[0]
        cut = [batch * g // GROUPS for g in range(GROUPS + 1)]

        def grouped():
            outs = [self.function(token_ids[a:b], lengths[a:b], max_new_tokens, seed + g * GROUP_SEED, temperature,
                                  top_p) for g, (a, b) in enumerate(zip(cut[:-1], cut[1:]))]
            return tuple(tf.concat([out[i] for out in outs], 0) for i in range(3))

        whole = lambda: tuple(self.function(token_ids, lengths, max_new_tokens, seed, temperature, top_p))
        return tf.cond(batch >= GROUP_FROM, grouped, whole)


# ---- the user's side -------------------------------------------------------------------------------
def _padded_rows(rows, new_tokens, xla):
    """`(padded [batch, width], lengths, room)` of the prompt rows; under XLA, in shape buckets
    (XLA compiles once per bucket, not once per prompt length): widths rounded up to a multiple of
    32 and `room` for the new tokens to a power of two, at least 16 (None off XLA)."""
    width = max(len(r) for r in rows)
    room = None
    if xla:
        width = -(-width // 32) * 32
        room = max(16, 1 << (new_tokens - 1).bit_length())
    padded = np.full((len(rows), width), PAD_ID, np.int32)
    for i, r in enumerate(rows):
        padded[i, :len(r)] = r
    return padded, np.array([len(r) for r in rows], np.int32), room


def _new_tokens(max_new_tokens, max_length):
    """`generate`'s number of new tokens from `max_new_tokens` or its deprecated name `max_length`."""
    if max_length is not None:
        if max_new_tokens is not None:
            raise ValueError("Give the number of new tokens once, as max_new_tokens (max_length is its "
                             "deprecated name), not both.")
        from zoo.deprecation import warn

        warn("generate(max_length=...)", "max_new_tokens=... (the same number of new tokens)", stacklevel=4)
        return max_length
    return 20 if max_new_tokens is None else max_new_tokens


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Generation:
    """`LanguageModel.generate`, on the model's `prefill`, `step`, output layer and vocabulary."""

    def _generation_options(self, new_tokens, temperature, top_k, top_p, num_beams, length_penalty,
                            no_repeat_ngram_size, seed, sampler, jit_compile, return_all_beams):
        """`generate`'s options checked (one sentence each): `(new_tokens, the sampler,
        no_repeat_ngram_size, seed, the names of the layers XLA cannot compile)`."""
        new_tokens, temperature, top_k, top_p, num_beams, length_penalty, no_repeat_ngram_size, seed = map(
            plain, (new_tokens, temperature, top_k, top_p, num_beams, length_penalty, no_repeat_ngram_size, seed))
        if not _is_int(new_tokens) or not 1 <= new_tokens <= MAX_NEW_TOKENS:
            raise ValueError(f"max_new_tokens must be an integer in [1, {MAX_NEW_TOKENS}], "
                             f"got {new_tokens!r}.")
        chosen = samplers.resolve(sampler, temperature, top_k, top_p, num_beams, length_penalty,
                                  vocabulary_size=self.vocabulary_size)
        if not _is_int(no_repeat_ngram_size) or not 0 <= no_repeat_ngram_size <= 16:
            raise ValueError(f"no_repeat_ngram_size must be an integer in [0, 16] (0: off), got {no_repeat_ngram_size!r}.")
        if seed is not None and not _is_int(seed):
            raise ValueError(f"seed must be an integer or None, got {seed!r}.")
        if jit_compile not in (True, False, "auto"):
            raise ValueError(f"jit_compile must be True, False or 'auto', got {jit_compile!r}.")
        # layers that XLA cannot compile say so (Keras' `supports_jit`): the sparse mixture of
        # experts, whose dispatch has data-dependent shapes
        uncompilable = [layer.name for layer in self.layers if not getattr(layer, "supports_jit", True)]
        if jit_compile is True and uncompilable:
            raise ValueError(f"jit_compile=True cannot compile this model's layers {', '.join(uncompilable)} (a sparse "
                             "MoE's dispatch has data-dependent shapes, which XLA does not take); use jit_compile=False "
                             "or 'auto'.")
        if jit_compile is True and chosen.is_search:
            raise ValueError("jit_compile=True: beam search runs as a graph loop only; use jit_compile='auto' or False.")
        if return_all_beams not in (True, False):
            raise ValueError(f"return_all_beams must be True or False, got {return_all_beams!r}.")
        if return_all_beams and not chosen.is_search:
            raise ValueError(f"return_all_beams=True returns beam search's beams; the sampler is {chosen.name!r}: "
                             "give sampler=\"beam\" (or num_beams=k).")
        return new_tokens, chosen, no_repeat_ngram_size, seed, uncompilable

    def generate(self, prompts: "str | list[str] | list[int] | list[list[int]]", max_new_tokens: "int | None" = None,
                 temperature: "float | None" = None, top_k: "int | None" = None, seed: "int | None" = None, *,
                 sampler: "str | samplers.Sampler | None" = None, top_p: "float | None" = None,
                 num_beams: "int | None" = None, length_penalty: "float | None" = None,
                 no_repeat_ngram_size: int = 0, stop: "str | int | list | None" = "auto",
                 jit_compile: "bool | str" = "auto", return_all_beams: bool = False,
                 max_length: "int | None" = None) -> "str | list[str] | list[int] | list[list[int]] | list":
        """Continue each prompt by up to `max_new_tokens` new tokens (default 20).

        Args:
            prompts: a string, a list of strings, one id list (`<int32>[time]`) or a list of id
                lists (`<int32>[batch, time]`, any lengths).
            max_new_tokens: new tokens per row, in [1, 2**20] (default 20).
            temperature, top_k, top_p, num_beams, length_penalty: the sampler's parameters.
            seed: the seed of the draws (None: a random one).
            sampler: a name ("greedy", "random", "top_k", "top_p", "beam") or a
                `zoo.samplers.Sampler` object.
            no_repeat_ngram_size: n > 0 forbids repeating any n-gram of the prompt and output.
            stop: "auto" (`</s>`), a string, an id, a list of them, or None.
            jit_compile: "auto", True or False (XLA for the decoding loop).
            return_all_beams: with beam search, every beam of each prompt instead of the best
                one (keras-hub's name): a list of `num_beams` dicts per prompt, best first,
                `{"output": text or ids, "log_prob": total log-probability of the new tokens,
                "score": log_prob / new tokens ** length_penalty}` (the ranking score).
            max_length: the deprecated name of `max_new_tokens`.

        Returns:
            Like `prompts`: a string (prompt and continuation, detokenised), a list of strings, an
            id list or a list of id lists (each the prompt's ids, then the new ones); with
            `return_all_beams`, a list of beams per prompt (one list for one prompt).

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="trained")
        >>> lm.generate("the company said", max_new_tokens=5, sampler="greedy")
        'the company said it will be <unk> to'
        >>> lm.generate([[1, 4, 5]], 3, sampler="greedy")
        [[1, 4, 5, 5, 6, 4]]

        `prompts`: a string (→ a string), or a list of strings (→ a list of strings), or one list
        of ids (→ a list of ids) or a list of id lists (→ a list of id lists); prompts of
        different lengths are decoded together in one batch. Text prompts start with `<s>` (an
        empty one is `<s>` alone) and the output is the prompt and its continuation, detokenised;
        ids are returned with the prompt's ids first.

        The sampler (`zoo.samplers`): `sampler` is "greedy", "random", "top_k", "top_p", "beam"
        or a sampler object, its parameters from `temperature`, `top_k`, `top_p`, `num_beams`,
        `length_penalty`; without `sampler`, as before: `temperature=0` is greedy, `top_k` /
        `top_p` sample among the likeliest, else a draw from the whole distribution at
        `temperature` (1.0). `seed` makes sampling reproducible (a row's draws depend on the seed,
        its index in the batch, the batch size and its own text, never on the other rows' text;
        see `decode` for the groups of rows of a large batch).
        `no_repeat_ngram_size=n` never lets a row repeat an n-gram of its prompt and output.

        A row ends after `</s>` (`stop="auto"`, the default), or also where one of `stop` (a
        string or id, or a list of them; an id list is a sequence of ids) appears in its new
        tokens: a returned text stops just before its stop text, returned ids end with the stop
        ids (as with `</s>`). `stop=None`: every row runs to `max_new_tokens` (keras-hub's
        `stop_token_ids=None`), `</s>` being a token like any other.
        `jit_compile`: "auto" (the default) compiles the loop with XLA where it can (greedy and
        sampling, models without MoE layers, whose dispatch has data-dependent shapes) and runs the
        graph loop otherwise (beam search, MoE models); True insists on XLA, False never uses it.
        XLA compiles once per batch size and shape bucket (prompt widths rounded up to a multiple
        of 32, `max_new_tokens` to a power of two, at least 16); its draws for a seed differ from the
        graph loop's, which the exported signature runs.
        `max_length`: the deprecated name of `max_new_tokens` (a DeprecationWarning).
        """
        new_tokens, chosen, no_repeat_ngram_size, seed, uncompilable = self._generation_options(
            _new_tokens(max_new_tokens, max_length), temperature, top_k, top_p, num_beams, length_penalty,
            no_repeat_ngram_size, seed, sampler, jit_compile, return_all_beams)
        rows, as_text, single = self._prompt_rows(prompts)
        stop_ids, stop_texts = self._stop(stop, as_text)
        # a model without a vocabulary has no </s> to stop at
        eos = self.tokenizer.eos_id if self.tokenizer is not None and stop is not None else NO_STOP
        xla = (jit_compile is True or jit_compile == "auto" and not uncompilable) and not chosen.is_search
        padded, lengths, room = _padded_rows(rows, new_tokens, xla)
        if seed is None:
            seed = int(np.random.default_rng().integers(2**62))
        run = compiled(self, chosen, int(no_repeat_ngram_size), stop_ids, int(eos), xla, room, return_all_beams)
        if return_all_beams:
            return self._all_beams(run, padded, lengths, new_tokens, rows, chosen.num_beams, as_text, single,
                                   stop_texts)
        ids, ends, _ = run(tf.constant(padded), tf.constant(lengths), tf.constant(new_tokens, tf.int32),
                           tf.constant(int(seed) % 2**31, tf.int64),  # as the exported signature maps it
                           tf.constant(getattr(chosen, "temperature", 1.0), tf.float32),
                           tf.constant(getattr(chosen, "p", 1.0), tf.float32))
        ids, ends = ids.numpy(), ends.numpy()
        out = [ids[i, :ends[i]].tolist() for i in range(len(rows))]
        if as_text:
            out = [self._text(row, len(prompt), stop_texts) for row, prompt in zip(out, rows)]
        return out[0] if single else out

    def _all_beams(self, run, padded, lengths, new_tokens, rows, n, as_text, single, stop_texts):
        """`generate(..., return_all_beams=True)`'s lists of beams, best first."""
        ids, ends, log_probs, scores = (t.numpy() for t in run(
            tf.constant(padded), tf.constant(lengths), tf.constant(new_tokens, tf.int32), tf.constant(0, tf.int64),
            tf.constant(1.0, tf.float32), tf.constant(1.0, tf.float32)))
        out = []
        for p, prompt in enumerate(rows):
            beams = []
            for b in range(p * n, (p + 1) * n):
                output = ids[b, :ends[b]].tolist()
                if as_text:
                    output = self._text(output, len(prompt), stop_texts)
                beams.append({"output": output, "log_prob": float(log_probs[b]), "score": float(scores[b])})
            out.append(beams)
        return out[0] if single else out

    def _prompt_rows(self, prompts):
        """`(id lists, whether they came as text, whether one prompt was given)`."""
        bos = self.tokenizer.bos_id if self.tokenizer is not None else BOS_ID
        if isinstance(prompts, (str, bytes)):
            rows = [self.require_tokenizer().encode(prompts, add_eos=False)]
            check_sequence_length(rows, "prompt")
            return rows, True, True
        if isinstance(prompts, np.ndarray):
            prompts = prompts.tolist()
        if not isinstance(prompts, (list, tuple)):
            raise ValueError(f"prompts must be a string, a list of strings, a list of ids or a list of id "
                             f"lists, got {type(prompts).__name__}.")
        texts = [isinstance(p, (str, bytes)) for p in prompts]
        if prompts and all(texts):
            vocabulary = self.require_tokenizer()
            rows = vocabulary.encode_batch(prompts, add_eos=False)
            check_sequence_length(rows, "prompt")
            return rows, True, False
        if any(texts):
            raise ValueError("prompts mixes strings with ids: give a list of strings or a list of id lists.")
        single = not any(isinstance(p, (list, tuple, np.ndarray)) for p in prompts)
        rows = [prompts] if single else prompts
        out = []
        for row in rows:
            if isinstance(row, np.ndarray):
                row = row.tolist()
            if not isinstance(row, (list, tuple)):
                raise ValueError(f"A prompt of ids must be a list of integers, got {row!r}.")
            if len(row) == 0:
                out.append([bos])
                continue
            ids = self.check_ids(row)
            if ids.ndim != 1:
                raise ValueError(f"A prompt of ids must be a flat list of integers, got one of shape {ids.shape}; "
                                 "give a list of ids or a list of id lists.")
            out.append([int(i) for i in ids])
        return out, False, single

    def _stop(self, stop, as_text):
        """`(stop id sequences for the graph, stop texts cut in Python)`."""
        if stop is None or isinstance(stop, str) and stop == "auto":
            return (), ()
        accepted = "a string, an id, a list of ids (one sequence), or a list of those"
        items = [stop] if isinstance(stop, (str, bytes, numbers.Integral)) else stop
        if isinstance(items, tuple):
            items = list(items)
        if not isinstance(items, list) or not items:
            raise ValueError(f"stop must be 'auto', None, {accepted}; got {stop!r}.")
        sequences, texts = [], []
        for item in items:
            item = item.decode("utf-8", "replace") if isinstance(item, bytes) else plain(item)
            if isinstance(item, str):
                if not item:
                    raise ValueError("A stop text must not be empty.")
                if not item.strip():  # generated text is words joined by spaces: it would stop at once
                    raise ValueError(f"A stop text must hold more than whitespace, got {item!r}.")
                if not as_text:
                    raise ValueError(f"A stop text ({item!r}) needs text prompts; with id prompts give stop ids.")
                texts.append(item)
                ids = self.tokenizer.encode(item, add_bos=False, add_eos=False)
                if ids and self.tokenizer.unk_id not in ids:  # the loop stops early on it; the text is cut below anyway
                    sequences.append(tuple(int(i) for i in ids))
                continue
            sequence = [item] if _is_int(item) else item
            if not isinstance(sequence, (list, tuple, np.ndarray)) or len(sequence) == 0 or \
                    not all(_is_int(plain(i)) for i in sequence):
                raise ValueError(f"A stop is {accepted}; got {item!r}.")
            sequences.append(tuple(int(i) for i in self.check_ids([int(i) for i in sequence]).reshape(-1)))
        return tuple(sequences), tuple(texts)

    def _text(self, ids, prompt_length, stop_texts):
        text = self.tokenizer.decode(ids, whole_characters=True)  # no U+FFFD for a character cut by the end
        if stop_texts:
            start = len(self.tokenizer.decode(ids[:prompt_length]))
            cuts = [i for i in (text.find(s, start) for s in stop_texts) if i >= 0]
            if cuts:
                text = text[:min(cuts)].rstrip()
        return text
