"""Generating text: `LanguageModel.generate`, a part of `LanguageModel` (zoo.models.base), which
mixes it in; the compiled generation functions it keeps; and how a decoding loop is laid out on
the machine that runs it (the output layer's blocks, the groups of rows), decided here in Python.

A batch of prompts of any lengths is right-padded; the model reads every prompt in one parallel
pass (`prefill`: the GCNN's convolutions over all positions at once, each conv layer's state
gathered at each row's length; the recurrent stack's layers run once over the prompt, masked past
each row's end) and then one `tf.while_loop` produces every new token: `step`, the output layer,
the sampler, the stop checks, all in the graph, with no Python per token. Rows that have stopped
write `<pad>` while the others go on; the loop ends when every row has stopped. The loop is the
sampler's (`zoo.models.samplers`: `Sampler.__call__`, beam search's own `Beam.__call__`), built
from the pieces of `zoo.models.decoding`; the exported `generate` signature
(`zoo.export.signatures`) runs the same loops.
"""

import contextlib
import numbers
import os

import numpy as np
import tensorflow as tf

from zoo.layers import int8
from zoo.layers.validation import plain
from zoo.models import decoding, samplers
# The loop's pieces and the samplers' arithmetic stay importable from here too.
from zoo.models.decoding import (BOS_ID, GROUP_FROM, GROUP_SEED, NO_STOP, PAD_ID, Rules,  # noqa: F401
                                 next_token_scores, prefill, reads_prompt_in_parallel, repeated_ngrams,
                                 stepwise_prefill, stopped)
from zoo.models.samplers import BLOCK, candidates, draw, greedy_choice, sample_tokens, top_k_of  # noqa: F401
from zoo.models.inference import check_sequence_length

MAX_NEW_TOKENS = 1 << 20  # the most `generate` writes a row (its buffer is allocated up front)
# The output layer's blocks in a graph loop for a few rows (head_blocks): by default as many as
# make each block fill at most CACHE_FILL of a core's level-2 cache, one product where that would
# take more than MAX_AUTO_HEAD_BLOCKS or the cache is unknown.
CACHE_FILL = 0.9
MAX_AUTO_HEAD_BLOCKS = 16
MAX_HEAD_BLOCKS = 64  # the most blocks an export may be asked for (zoo export --head-blocks)
# An export's default blocks, whatever the exporting machine's cache: one product, the choice
# that holds up best across level-2 caches of 0.5 to 32 MiB (results/benchmarks/head-blocks.md).
EXPORT_HEAD_BLOCKS = 1
CPU_CACHE = "/sys/devices/system/cpu/cpu0/cache"


# ---- the loop on this machine ---------------------------------------------------------------------
@contextlib.contextmanager
def loop_invariants(model, **options):
    """While a decoding loop is traced: what does not change from token to token (an int8
    model's dequantized weights, the GCNN's weight-normalised kernels) is computed once, before
    the loop, where the family says how (its `loop_invariants(**options)` context manager, e.g.
    the GCNN's `split_products`)."""
    hook = getattr(model, "loop_invariants", None)
    with int8.dequantized_once(model), (hook(**options) if hook is not None else contextlib.nullcontext()):
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


def head_blocks(model, blocks=None, cache_bytes=None):
    """How many products over blocks of ids the output layer runs as in a graph loop for fewer
    than `GROUP_FROM` rows (`FullSoftmax.blocks_computed_once`): `blocks` if given, 1 for a layer
    that has no blocks (the adaptive softmax), else the fewest blocks that each fit `CACHE_FILL`
    of a level-2 cache per core of `cache_bytes` (None: this machine's, read from Linux): on the
    CPUs measured, one row's product slows down once its matrix outgrows that cache, and blocks
    that fit it, run side by side on the cores, are faster (results/benchmarks/served-generate.md).
    1 (the one product) where the cache is unknown or more than `MAX_AUTO_HEAD_BLOCKS` would be
    needed."""
    fit = getattr(model.head, "blocks_to_fit", None)  # a full or tied layer
    if fit is None:
        return 1
    if blocks is not None:
        return min(blocks, model.head.vocabulary_size)
    cache = l2_cache_bytes() if cache_bytes is None else cache_bytes
    if cache is None:
        return 1
    blocks = fit(cache * CACHE_FILL)
    return blocks if blocks <= MAX_AUTO_HEAD_BLOCKS else 1


head_blocks_of = head_blocks  # for the loops whose `head_blocks` keyword hides the function


def export_head_blocks(model, blocks=None):
    """The output layer's blocks of an export's `generate`: `blocks` if given (as `head_blocks`
    takes them), else `EXPORT_HEAD_BLOCKS`. A model server runs no Python to read its machine's
    cache, and the exporting machine's says nothing of the servers', so the default is the one
    that holds up across level-2 caches (results/benchmarks/head-blocks.md); an operator who knows
    the servers' cache gives `head_blocks(model, cache_bytes=...)`'s number."""
    return head_blocks(model, blocks) if blocks is not None else EXPORT_HEAD_BLOCKS


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
    return decoding.never_scores_of(never_emitted(model), model.vocabulary_size)


def rules(model, eos_id=NO_STOP, stop_sequences=(), ngram=0):
    """The `decoding.Rules` every row of `model`'s loops follows: stop after `eos_id` or one of
    `stop_sequences`, never write `never_emitted(model)`, no repeated n-gram of size `ngram`."""
    return Rules(int(eos_id), tuple(stop_sequences), int(ngram), tuple(never_emitted(model)))


# ---- the loops -------------------------------------------------------------------------------------
GROUPS = 2  # a batch of at least GROUP_FROM rows decodes as this many independent groups of rows


def decode(model, token_ids, lengths, max_new_tokens, choose, seed, eos_id, stop_sequences=(), ngram=0,
           with_log_prob=False, groups=GROUPS, room=None, head_blocks=None):
    """`Sampler.__call__`'s loop with a token chooser `choose(scores, seed, step)` for a sampler:
    `(ids, ends)`, and with `with_log_prob` the new tokens' log-probability. `head_blocks`: the
    output layer's blocks at fewer than `GROUP_FROM` rows (None: this machine's `head_blocks`).

    A batch of `GROUP_FROM` rows or more is split into `groups` groups (the first rows, then the
    rest) that one loop decodes side by side: their ops are independent, so TensorFlow's executor
    runs one group's small ops while the other's run (`zoo benchmark generate`: 1.3× at 32 rows
    on 2 cores). Group g draws with seed `seed + g · GROUP_SEED`, so a row's draws depend on the
    seed, its index in the batch and the batch size, never on the other rows' text."""
    ids, ends, total = _Chooser(choose)(model, token_ids, lengths, max_new_tokens, seed,
                                        rules(model, eos_id, stop_sequences, ngram), with_log_prob=with_log_prob,
                                        groups=groups, room=room, head_blocks=head_blocks_of(model, head_blocks))
    return (ids, ends, total) if with_log_prob else (ids, ends)


class _Chooser(samplers.Sampler):
    """A sampler whose choice is a function `choose(scores, seed, step)` (`decode`'s)."""

    def __init__(self, choose):
        self.next = choose


def beam_search(model, token_ids, lengths, max_new_tokens, num_beams, length_penalty, eos_id,
                stop_sequences=(), ngram=0, against_greedy=True, all_beams=False):
    """`Beam(num_beams, length_penalty)`'s loop (`Beam.__call__`): the best hypothesis of each
    prompt, `(ids, ends, log-probability)`; `against_greedy=False` the best beam alone, without
    the greedy hypothesis (tests); `all_beams=True` every beam (`Beam.every_beam`)."""
    beams, rules_ = samplers.Beam(num_beams, length_penalty), rules(model, eos_id, stop_sequences, ngram)
    lengths = tf.cast(lengths, tf.int32)
    if all_beams:
        return beams.every_beam(model, token_ids, lengths, max_new_tokens, 0, rules_)
    if against_greedy:
        return beams(model, token_ids, lengths, max_new_tokens, 0, rules_, groups=GROUPS,
                     head_blocks=head_blocks_of(model))
    return beams.best(model, token_ids, lengths, max_new_tokens, rules_)[:3]


def compiled(model, sampler, ngram, stop_sequences, eos_id, jit_compile, room=None, all_beams=False):
    """The compiled generation function of `model` for one static configuration, made once and
    kept on the model: `fn(token_ids, lengths, max_new_tokens, seed, parameters)` runs the
    sampler's loop (`sampler(...)`, or `sampler.every_beam` with `all_beams`), `parameters` being
    `{name: scalar tensor}` of the sampler's `dynamic` parameters, so that a new value of them
    traces nothing; its other parameters are part of the configuration (`static_key`).

    The loop's layout is this machine's: the output layer in `head_blocks_of(model)` blocks at a
    few rows and `GROUPS` groups of rows at `GROUP_FROM` rows or more in a graph loop. With
    `jit_compile`, a batch of `GROUP_FROM` rows or more is cut into `GROUPS` groups, each
    decoded by its own XLA-compiled loop, the loops launched side by side from one graph (one XLA
    computation runs its ops one after the other; two run at once on two cores). Group g draws
    with seed `seed + g · GROUP_SEED`, as the graph loop's groups do."""
    functions = model.__dict__.setdefault("_generation_functions", {})
    dynamic = {name: sampler.tensor_spec(name) for name in sampler.dynamic}
    key = (sampler.static_key(), tuple((name, spec.dtype.name) for name, spec in dynamic.items()), ngram,
           stop_sequences, eos_id, jit_compile, room, all_beams)
    if key in functions:
        return functions[key]
    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64), dynamic]
    layout = {"groups": 1, "head_blocks": 1} if jit_compile else \
        {"groups": GROUPS, "head_blocks": head_blocks_of(model)}
    rules_ = rules(model, eos_id, stop_sequences, ngram)

    def run(token_ids, lengths, max_new_tokens, seed, parameters):
        bound = sampler.bound(**parameters)
        if all_beams:
            return bound.every_beam(model, token_ids, lengths, max_new_tokens, seed, rules_, room=room)
        return bound(model, token_ids, lengths, max_new_tokens, seed, rules_, room=room, **layout)

    function = tf.function(_Traced(model, run), input_signature=spec, autograph=False, jit_compile=jit_compile)
    if jit_compile:
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

    def __call__(self, token_ids, lengths, max_new_tokens, seed, parameters):
        batch = tf.shape(lengths)[0]
        cut = [batch * g // GROUPS for g in range(GROUPS + 1)]

        def grouped():
            outs = [self.function(token_ids[a:b], lengths[a:b], max_new_tokens, seed + g * GROUP_SEED, parameters)
                    for g, (a, b) in enumerate(zip(cut[:-1], cut[1:]))]
            return tuple(tf.concat([out[i] for out in outs], 0) for i in range(3))

        whole = lambda: tuple(self.function(token_ids, lengths, max_new_tokens, seed, parameters))
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
        no_repeat_ngram_size, seed, whether XLA cannot compile the loop: a layer of the model
        or the sampler's loop says so)`."""
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
        compiles = chosen.compiles(jit_compile)  # beam search: a graph loop only
        if return_all_beams not in (True, False):
            raise ValueError(f"return_all_beams must be True or False, got {return_all_beams!r}.")
        chosen.check_return_all_beams(return_all_beams)
        return new_tokens, chosen, no_repeat_ngram_size, seed, bool(uncompilable) or not compiles

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
        new_tokens, chosen, no_repeat_ngram_size, seed, no_xla = self._generation_options(
            _new_tokens(max_new_tokens, max_length), temperature, top_k, top_p, num_beams, length_penalty,
            no_repeat_ngram_size, seed, sampler, jit_compile, return_all_beams)
        rows, as_text, single = self._prompt_rows(prompts)
        stop_ids, stop_texts = self._stop(stop, as_text)
        # a model without a vocabulary has no </s> to stop at
        eos = self.tokenizer.eos_id if self.tokenizer is not None and stop is not None else NO_STOP
        xla = jit_compile is True or jit_compile == "auto" and not no_xla
        padded, lengths, room = _padded_rows(rows, new_tokens, xla)
        if seed is None:
            seed = int(np.random.default_rng().integers(2**62))
        run = compiled(self, chosen, int(no_repeat_ngram_size), stop_ids, int(eos), xla, room, return_all_beams)
        if return_all_beams:
            return self._all_beams(run, padded, lengths, new_tokens, rows, chosen, as_text, single, stop_texts)
        ids, ends, _ = run(tf.constant(padded), tf.constant(lengths), tf.constant(new_tokens, tf.int32),
                           tf.constant(int(seed) % 2**31, tf.int64),  # as the exported signature maps it
                           chosen.tensors(chosen.dynamic))
        ids, ends = ids.numpy(), ends.numpy()
        out = [ids[i, :ends[i]].tolist() for i in range(len(rows))]
        if as_text:
            out = [self._text(row, len(prompt), stop_texts) for row, prompt in zip(out, rows)]
        return out[0] if single else out

    def _all_beams(self, run, padded, lengths, new_tokens, rows, chosen, as_text, single, stop_texts):
        """`generate(..., return_all_beams=True)`'s lists of beams, best first."""
        ids, ends, log_probs, scores = (t.numpy() for t in run(
            tf.constant(padded), tf.constant(lengths), tf.constant(new_tokens, tf.int32), tf.constant(0, tf.int64),
            chosen.tensors(chosen.dynamic)))
        n = chosen.num_beams
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
