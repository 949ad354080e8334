"""How `LanguageModel.generate` chooses each new token: one class per sampler, as keras-hub's
samplers are, each owning its parameters, their checks, the `generate` keywords it takes, its
choice of the next token (`next`) and the decoding loop that makes it (`__call__`: the base
class's loop chooses one token per row and step; beam search overrides it with its own).

    lm.generate(prompts, sampler="greedy")
    lm.generate(prompts, sampler="top_k", top_k=40, temperature=0.8)
    lm.generate(prompts, sampler=zoo.samplers.TopP(0.9))
    lm.generate(prompts, sampler="beam", num_beams=4, length_penalty=1.0)

- `Greedy()`: the most likely token.
- `Random(temperature)`: a draw from the whole distribution (`softmax(log p / temperature)`).
- `TopK(k, temperature)`: a draw among the k most likely tokens.
- `TopP(p, temperature, k=None)`: nucleus sampling: a draw among the smallest set of most likely
  tokens whose probability (after temperature) reaches p, within the k most likely if k is given.
- `Beam(num_beams, length_penalty)`: beam search; the finished beams are ranked by their
  log-probability divided by `new tokens ** length_penalty` (fairseq's `--lenpen`; 0 ranks by
  log-probability alone, larger values favour longer outputs).
- `Served(temperature, top_k, top_p)`: the exported `generate` signature's sampler, its settings
  being the request's tensors; it chooses with the classes above.

A new sampler is a subclass of `Sampler` with a `name` and a `next` (docs/generating.md#adding-a-sampler);
the decoding loop never emits `<pad>` or `<s>` (nor a subword tokenizer's `<unk>`) whatever a
sampler picks, since their log-probabilities are −inf by then (`zoo.models.decoding.Rules`).

A sampler's parameters reach every loop that runs it: those it lists in `dynamic` as tensors of
the in-process compiled loop (a new value traces nothing), the others as part of what that loop
is specialised to; in an export, those it lists in `request` as inputs of the `generate`
signature, the others fixed at export and recorded in `zoo_export.json`.
"""

import copy
import dataclasses
import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from zoo.models import decoding
from zoo.models.decoding import GROUP_FROM, GROUP_SEED, PAD_ID, Rules

# ---- the arithmetic the samplers share ----------------------------------------------------------
BLOCK = 32  # ids per block of `top_k_of`


def top_k_of(logits, k):
    """`tf.math.top_k(logits, k)` (values and ids, largest first), exactly, but faster when k is
    much smaller than the vocabulary (CPU's TopKV2 dominated a batch's decoding step): the k
    largest values lie in the k blocks of `BLOCK` consecutive ids with the largest maxima (a value
    outside them would have k blocks, each with a larger value, above it), so one top-k runs on
    the block maxima and one on those k blocks' values only."""
    vocabulary = logits.shape[-1]
    plain = lambda: tuple(tf.math.top_k(logits, k))
    if vocabulary is None or vocabulary < 4 * BLOCK:
        return plain()
    size = block_size(vocabulary)
    blocks = -(-vocabulary // size)

    def blocked():
        padded = logits if blocks * size == vocabulary else \
            tf.pad(logits, [[0, 0], [0, blocks * size - vocabulary]], constant_values=-np.inf)
        grouped = tf.reshape(padded, [-1, blocks, size])
        _, chosen = tf.math.top_k(tf.reduce_max(grouped, axis=-1), k)
        chosen = tf.sort(chosen, axis=-1)  # ids in order, so that ties go to the lower id as in top_k
        values = tf.reshape(tf.gather(grouped, chosen, batch_dims=1), [-1, k * size])
        ids = tf.reshape(chosen[:, :, None] * size + tf.range(size)[None, None, :], [-1, k * size])
        top, where = tf.math.top_k(values, k)
        return top, tf.gather(ids, where, batch_dims=1)

    if isinstance(k, int):
        return blocked() if 4 * k * size <= vocabulary else plain()
    return tf.cond(4 * k * size <= vocabulary, blocked, plain)


def block_size(vocabulary):
    """The block of `top_k_of` for a vocabulary: the divisor of `vocabulary` in [BLOCK/2, 2·BLOCK]
    nearest `BLOCK` (no padding of the logits at every token), else `BLOCK` (the last block padded)."""
    divisors = [d for d in range(BLOCK // 2, 2 * BLOCK + 1) if vocabulary % d == 0]
    return min(divisors, key=lambda d: (abs(d - BLOCK), d)) if divisors else BLOCK


def candidates(log_probs, temperature=1.0, top_k=None, top_p=None):
    """The tokens a sampler draws among, most likely first: `(logits [batch, n], ids [batch, n])`,
    a dropped candidate's logit being −inf. `top_k` keeps the k most likely; `top_p` then the
    smallest set whose probability (after temperature, within the top k if given) reaches p.
    Without either, every token (`n` = vocabulary). Values may be Python numbers or tensors."""
    logits = log_probs / temperature
    vocabulary = tf.shape(logits)[-1]
    if top_k is None:
        k = log_probs.shape[-1] if log_probs.shape[-1] is not None else vocabulary
    elif isinstance(top_k, int) and log_probs.shape[-1] is not None:
        k = min(top_k, log_probs.shape[-1])
    else:
        k = tf.minimum(tf.cast(top_k, tf.int32), vocabulary)
    if top_k is None and top_p is None:
        return logits, tf.broadcast_to(tf.range(vocabulary), tf.shape(logits))
    values, ids = top_k_of(logits, k)
    if top_p is not None:
        before = tf.cumsum(tf.nn.softmax(values, axis=-1), axis=-1, exclusive=True)  # mass of the likelier ones
        values = tf.where(before < tf.cast(top_p, values.dtype), values, -np.inf)
    return values, ids


def draw(logits, ids, seed, step):
    """One draw per row from `softmax(logits)`, returned as the matching `ids`. Stateless: the
    draw depends only on `(seed, step)`, the row's index and its logits, so a row's output never
    depends on the other rows of its batch."""
    seed = tf.stack([tf.cast(seed, tf.int32), tf.cast(step, tf.int32)])
    index = tf.random.stateless_categorical(logits, 1, seed=seed, dtype=tf.int32)[:, 0]
    return tf.gather(ids, index, batch_dims=1)


def sample_tokens(log_probs, seed, step, temperature=1.0, top_k=None, top_p=None):
    """A draw per row at `temperature` among `candidates`."""
    logits, ids = candidates(log_probs, temperature, top_k, top_p)
    return draw(logits, ids, seed, step)


def greedy_choice(scores, seed=None, step=None):
    """The most likely id of each row: `<int32>[batch]`."""
    return tf.argmax(scores, axis=-1, output_type=tf.int32)


# ---- argument checks -------------------------------------------------------------------------------
# A parameter given as a tensor (a request's, inside a traced loop) is not checked here: whoever
# gives it checks it (the exported signature asserts on its inputs).
def _check_temperature(temperature):
    if tf.is_tensor(temperature):
        return temperature
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}.")
    if temperature == 0:
        raise ValueError("temperature=0 is greedy decoding, which draws nothing: use sampler='greedy' (or no "
                         "sampler), or a temperature > 0 to sample.")
    return float(temperature)


def _check_k(k, vocabulary_size=None):
    if tf.is_tensor(k):
        return k
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 or \
            vocabulary_size is not None and k > vocabulary_size:
        accepted = f"in [1, {vocabulary_size}] (the vocabulary size)" if vocabulary_size else "an integer >= 1"
        raise ValueError(f"top_k must be {accepted}, got {k!r}.")
    return int(k)


# ---- the loop's step -------------------------------------------------------------------------------
def _step(model, lengths, choose, seed, rules, with_log_prob):
    """One step of `Sampler.__call__`'s loop for one group of rows: `(done, ends, buffer, total,
    hidden, state)` after the next token, chosen by `choose(scores, seed, step)`."""
    rows = tf.range(tf.shape(lengths)[0])
    never = decoding.never_scores_of(rules.never, model.vocabulary_size)

    def body(step, done, ends, buffer, total, hidden, state):
        log_probs = decoding.banned(decoding.next_token_scores(model, hidden, normalised=with_log_prob), never,
                                    buffer, ends, rules.ngram)
        token = tf.where(done, PAD_ID, choose(log_probs, seed, step))
        if with_log_prob:
            total += tf.where(done, 0.0, tf.gather(log_probs, token, batch_dims=1))
        buffer = tf.tensor_scatter_nd_update(buffer, tf.stack([rows, ends], axis=1), token)
        ends += tf.cast(~done, tf.int32)
        done |= tf.equal(token, rules.eos_id) | decoding.stopped(buffer, ends, lengths, rules.stop_sequences)
        hidden, state = model.step(token, state)
        return done, ends, buffer, total, hidden, state

    return body


# ---- the samplers ----------------------------------------------------------------------------------
REGISTERED = {}  # name -> Sampler subclass: what `generate(sampler="name")` takes


class Sampler:
    """A way of choosing the next token, and the decoding loop that chooses it (`__call__`). A
    subclass with a `name` is registered under it, so `generate(sampler=name)` finds it; its
    `keywords` map `generate`'s keyword arguments onto its constructor's parameters (e.g.
    `{"top_k": "k"}`), and `next` makes the choice.

    `dynamic` names the parameters the in-process compiled loop takes as tensors (`temperature`,
    `p`), so that a new value of them needs no new trace or compilation; every other parameter is
    part of what a compiled loop is specialised to (`static_key`). `request` names the parameters
    an export's `generate` signature takes as inputs of each request (named as `keywords` name
    them, a request that leaves one out getting the exported sampler's value); every other
    parameter is fixed at export and recorded in `zoo_export.json`.

    Example: a sampler that always writes each row's second most likely token (no `name`, so it is
    given as an object rather than registered):

    >>> import dataclasses, tensorflow as tf, zoo
    >>> from zoo.models.samplers import Sampler
    >>> @dataclasses.dataclass(frozen=True)
    ... class Second(Sampler):
    ...     def next(self, log_probs, seed, step):
    ...         return tf.math.top_k(log_probs, 2).indices[:, 1]
    >>> Second().next(tf.math.log([[0.1, 0.7, 0.2]]), seed=0, step=0).numpy().tolist()
    [2]
    >>> lm = zoo.load("gcnn-ptb", weights="trained")
    >>> lm.generate("the company said", max_new_tokens=5, sampler=Second())
    'the company said the <unk> is <unk>'
    """

    name = None
    keywords = {}  # generate's keyword -> constructor parameter
    dynamic = ()  # parameters the in-process compiled loop takes as tensors
    request = ()  # parameters an exported `generate` takes from each request

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            REGISTERED[cls.name] = cls

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        """The next token of each row.

        Args:
            log_probs: `<float32>[batch, vocabulary]`, the next token's log-probabilities (up to
                a constant per row), banned tokens at −inf.
            seed: `<int64>[]`, the request's seed; with `step`, all a draw may depend on.
            step: `<int32>[]`, the index of the token being chosen.

        Returns:
            `<int32>[batch]`: the chosen ids.
        """
        raise NotImplementedError(f"{type(self).__name__} must define next(log_probs, seed, step).")

    def __call__(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
                 max_new_tokens: "tf.Tensor | int", seed: "tf.Tensor | int", rules: Rules = Rules(), *,
                 with_log_prob: bool = False, groups: int = 1, room: "int | None" = None,
                 head_blocks: int = 1) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor]":
        """The decoding loop: up to `max_new_tokens` new tokens after each right-padded prompt, one
        per row and step, chosen by `next`, in one `tf.while_loop` (no Python per token); a row
        follows `rules` and writes `<pad>` once stopped, and the loop ends when every row has.

        Args:
            model: the language model (`prefill`, `step`, `head`).
            token_ids: `<int32>[batch, time]`, the prompts, right-padded.
            lengths: `<int32>[batch]`, each prompt's length (≥ 1).
            max_new_tokens: `<int32>[]` or an int.
            seed: `<int64>[]`, the draws' seed.
            rules: the stops, the ids never written, the no-repeat n-gram size.
            with_log_prob: add up the new tokens' log-probabilities (the scores are then
                normalised, which a full softmax's plain logits are not).
            groups: a batch of `GROUP_FROM` rows or more is decoded as this many groups of rows
                side by side (their ops are independent, so the executor overlaps them); group g
                draws with seed `seed + g · GROUP_SEED`.
            room: the columns after the prompts (a Python int ≥ `max_new_tokens`: XLA needs
                static shapes); None: `max_new_tokens`.
            head_blocks: the output layer's products over blocks of ids at fewer than
                `GROUP_FROM` rows (`zoo.models.decoding.in_blocks`; 1: one product).

        Returns:
            `(ids [batch, time + room], ends [batch], log_prob [batch])`: row b's prompt and new
            tokens are `ids[b, :ends[b]]`, the rest `<pad>`; `log_prob` is 0 without
            `with_log_prob`.
        """
        lengths = tf.cast(lengths, tf.int32)
        hidden, state = decoding.prefill(model, token_ids, lengths)
        buffer = decoding.prompt_buffer(token_ids, max_new_tokens if room is None else room)
        batch, seed = tf.shape(lengths)[0], tf.cast(seed, tf.int64)

        def run(bounds):
            parts = [(lambda x, a=a, b=b: x[a:b]) for a, b in bounds]
            groups = [[tf.zeros_like(part(lengths), tf.bool), part(lengths), part(buffer),
                       tf.zeros(tf.shape(part(lengths))), part(hidden), tf.nest.map_structure(part, state)]
                      for part in parts]
            bodies = [_step(model, part(lengths), self.next, seed + g * GROUP_SEED, rules, with_log_prob)
                      for g, part in enumerate(parts)]

            def body(step, groups):
                return step + 1, [list(b(step, *group)) for b, group in zip(bodies, groups)]

            def keep_going(step, groups):
                return (step < max_new_tokens) & ~tf.reduce_all(tf.concat([group[0] for group in groups], 0))

            _, groups = tf.while_loop(keep_going, body, (tf.constant(0), groups))
            return tuple(tf.concat([group[i] for group in groups], 0) for i in (2, 1, 3))  # buffer, ends, total

        def few_rows():
            with decoding.in_blocks(model, head_blocks):
                return run([(0, batch)])

        if groups == 1:
            return few_rows() if head_blocks > 1 else run([(0, batch)])
        cut = [batch * g // groups for g in range(groups + 1)]
        return tf.cond(batch >= GROUP_FROM, lambda: run(list(zip(cut[:-1], cut[1:]))), few_rows)

    def compiles(self, jit_compile: "bool | str") -> bool:
        """Whether this sampler's loop may be compiled with XLA, given `generate`'s `jit_compile`
        ("auto", True or False), refusing in one sentence a setting it cannot run."""
        return True

    def check_return_all_beams(self, return_all_beams: bool) -> None:
        """Refuse `generate(return_all_beams=True)` in one sentence unless the loop keeps beams."""
        if return_all_beams:
            raise ValueError(f"return_all_beams=True returns beam search's beams; the sampler is {self.name!r}: "
                             "give sampler=\"beam\" (or num_beams=k).")

    def parameters(self) -> "dict[str, Any]":
        """`{name: value}` of the sampler's parameters (a dataclass's fields, else its attributes)."""
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return dict(vars(self))

    def tensor_spec(self, name: str, spec_name: "str | None" = None) -> tf.TensorSpec:
        """The scalar `tf.TensorSpec` parameter `name` is taken as: a dataclass field's declared
        type (`float` → float32, `int` → int32, `bool` → bool), else its value's."""
        kinds = {"bool": tf.bool, "int": tf.int32, "float": tf.float32}
        declared = {f.name: f.type for f in dataclasses.fields(self)} if dataclasses.is_dataclass(self) else {}
        kind = declared.get(name)
        kind = getattr(kind, "__name__", kind)
        if kind not in kinds:
            value = getattr(self, name)
            kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, numbers.Integral) else "float"
        return tf.TensorSpec([], kinds[kind], name=spec_name)

    def tensors(self, names: "Iterable[str]") -> "dict[str, tf.Tensor]":
        """`{name: the parameter's value as a tensor of its `tensor_spec`}` for `names`."""
        return {name: tf.constant(getattr(self, name), self.tensor_spec(name).dtype) for name in names}

    def static_key(self) -> tuple:
        """What a compiled loop is specialised to: the class and its non-dynamic parameters."""
        return (type(self).__module__, type(self).__qualname__,
                tuple(sorted((k, v) for k, v in self.parameters().items() if k not in self.dynamic)))

    def bound(self, **values: Any) -> "Sampler":
        """A copy whose parameters `values` are replaced (tensors inside a trace, which the checks
        leave to whoever gives them); a dataclass sampler is made again by its own constructor."""
        if dataclasses.is_dataclass(self):
            return dataclasses.replace(self, **values)
        bound = copy.copy(self)
        for name, value in values.items():
            setattr(bound, name, value)
        return bound

    @classmethod
    def from_keywords(cls, given: "dict[str, Any]") -> "Sampler":
        """The sampler made from `generate`'s keyword arguments `given` (those it takes)."""
        return cls(**{cls.keywords[k]: v for k, v in given.items()})


@dataclasses.dataclass(frozen=True)
class Greedy(Sampler):
    """The most likely token.

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import Greedy
    >>> log_probs = tf.math.log([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    >>> Greedy().next(log_probs, seed=0, step=0).numpy().tolist()
    [1, 0]
    """

    name = "greedy"

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        return greedy_choice(log_probs)


@dataclasses.dataclass(frozen=True)
class Random(Sampler):
    """A draw from the whole distribution at `temperature` (`softmax(log p / temperature)`).

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import Random
    >>> log_probs = tf.math.log([[0.0, 1.0, 0.0]] * 4)  # all the mass on id 1
    >>> Random(temperature=0.7).next(log_probs, seed=3, step=0).numpy().tolist()
    [1, 1, 1, 1]
    """

    temperature: float = 1.0
    name = "random"
    keywords = {"temperature": "temperature"}
    dynamic = ("temperature",)

    def __post_init__(self):
        _check_temperature(self.temperature)

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        return sample_tokens(log_probs, seed, step, self.temperature)


@dataclasses.dataclass(frozen=True)
class TopK(Sampler):
    """A draw at `temperature` among the `k` most likely tokens.

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import TopK
    >>> log_probs = tf.math.log([[0.05, 0.5, 0.05, 0.4]] * 50)
    >>> sorted(set(TopK(k=2).next(log_probs, seed=1, step=0).numpy().tolist()))  # ids 1 and 3 only
    [1, 3]
    """

    k: int = 40
    temperature: float = 1.0
    name = "top_k"
    keywords = {"top_k": "k", "temperature": "temperature"}
    dynamic = ("temperature",)

    def __post_init__(self):
        _check_k(self.k)
        _check_temperature(self.temperature)

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        return sample_tokens(log_probs, seed, step, self.temperature, self.k)


@dataclasses.dataclass(frozen=True)
class TopP(Sampler):
    """Nucleus sampling: a draw among the smallest set of most likely tokens whose probability
    (after `temperature`) reaches `p`, within the `k` most likely if `k` is given.

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import TopP
    >>> log_probs = tf.math.log([[0.6, 0.3, 0.1]] * 50)
    >>> sorted(set(TopP(p=0.8).next(log_probs, seed=1, step=0).numpy().tolist()))  # 0.6 + 0.3 reach 0.8
    [0, 1]
    """

    p: float = 0.9
    temperature: float = 1.0
    k: int = None
    name = "top_p"
    keywords = {"top_p": "p", "temperature": "temperature", "top_k": "k"}
    dynamic = ("temperature", "p")

    def __post_init__(self):
        if not tf.is_tensor(self.p) and (isinstance(self.p, bool) or not isinstance(self.p, numbers.Real)
                                         or not 0 < self.p <= 1):
            raise ValueError(f"top_p must be a number in (0, 1], got {self.p!r}.")
        _check_temperature(self.temperature)
        if self.k is not None:
            _check_k(self.k)

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        return sample_tokens(log_probs, seed, step, self.temperature, self.k, self.p)


@dataclasses.dataclass(frozen=True)
class Beam(Sampler):
    """Beam search: `num_beams` hypotheses per prompt; finished ones are ranked by
    `log-probability / new tokens ** length_penalty`. Its loop (`__call__`, in place of the base
    class's) keeps the hypotheses; `select` chooses which extensions survive a step and `rank`
    which hypothesis wins. `next`, for a single hypothesis, is the greedy choice.

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import Beam
    >>> totals = tf.constant([[-1.0, -0.5, -3.0, -0.7]])  # 2 beams x 2 tokens, flattened
    >>> scores, kept = Beam(num_beams=2).select(totals)
    >>> kept.numpy().tolist(), scores.numpy().tolist()
    ([[1, 3]], [[-0.5, -0.699999988079071]])
    """

    num_beams: int = 4
    length_penalty: float = 1.0
    name = "beam"
    keywords = {"num_beams": "num_beams", "length_penalty": "length_penalty"}

    def __post_init__(self):
        if not tf.is_tensor(self.num_beams) and (isinstance(self.num_beams, bool) or not isinstance(
                self.num_beams, numbers.Integral) or self.num_beams < 1):
            raise ValueError(f"num_beams must be an integer >= 1, got {self.num_beams!r}.")
        if not tf.is_tensor(self.length_penalty) and (isinstance(self.length_penalty, bool) or not isinstance(
                self.length_penalty, numbers.Real) or not math.isfinite(self.length_penalty)):
            raise ValueError(f"length_penalty must be a finite number, got {self.length_penalty!r}.")

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        return greedy_choice(log_probs)

    def select(self, totals: tf.Tensor) -> "tuple[tf.Tensor, tf.Tensor]":
        """The surviving extensions: `totals` `<float32>[batch, beams * vocabulary]` (each
        hypothesis' log-probability plus each next token's) → `(scores, indices)`, both
        `[batch, num_beams]`, best first."""
        scores, kept = tf.math.top_k(totals, self.num_beams)
        return scores, kept

    def rank(self, scores: tf.Tensor, new_tokens: tf.Tensor) -> tf.Tensor:
        """The ranking score of finished hypotheses: log-probability `scores` divided by their
        number of `new_tokens` (`<float32>`, same shape) to the power `length_penalty`."""
        return scores / new_tokens ** tf.cast(self.length_penalty, tf.float32)

    def compiles(self, jit_compile: "bool | str") -> bool:
        if jit_compile is True:
            raise ValueError("jit_compile=True: beam search runs as a graph loop only; use jit_compile='auto' or "
                             "False.")
        return False

    def check_return_all_beams(self, return_all_beams: bool) -> None:
        return None  # every beam is what beam search has to give

    def __call__(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
                 max_new_tokens: "tf.Tensor | int", seed: "tf.Tensor | int" = 0, rules: Rules = Rules(), *,
                 with_log_prob: bool = False, groups: int = 1, room: "int | None" = None,
                 head_blocks: int = 1) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor]":
        """Beam search's loop, in place of `Sampler.__call__` (same arguments and returns; `seed`
        unused, `log_prob` always given): the best hypothesis of each prompt, ranked together
        with the greedy one, decoded beside the beams by `Greedy`'s loop (with `groups` and
        `head_blocks`): beam search can lose the greedy hypothesis on the way, and never returns
        anything ranked below it."""
        lengths = tf.cast(lengths, tf.int32)
        ids, ends, score, ranked_best = self.best(model, token_ids, lengths, max_new_tokens, rules, room)
        g_ids, g_ends, g_score = Greedy()(model, token_ids, lengths, max_new_tokens, 0, rules, with_log_prob=True,
                                          groups=groups, room=room, head_blocks=head_blocks)
        g_ranked = self.rank(g_score, tf.cast(tf.maximum(g_ends - lengths, 1), tf.float32))
        greedy_wins = g_ranked > ranked_best
        return (tf.where(greedy_wins[:, None], g_ids, ids), tf.where(greedy_wins, g_ends, ends),
                tf.where(greedy_wins, g_score, score))

    def best(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
             max_new_tokens: "tf.Tensor | int", rules: Rules = Rules(),
             room: "int | None" = None) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]":
        """The best beam of each prompt (the greedy hypothesis not added): `(ids, ends,
        log-probability, ranking score)`."""
        lengths = tf.cast(lengths, tf.int32)
        buffer, ends, scores, tiled = self.search(model, token_ids, lengths, max_new_tokens, rules, room)
        return _ranked_beams(self, buffer, ends, scores, tiled, tf.shape(lengths)[0], self.num_beams)

    def every_beam(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
                   max_new_tokens: "tf.Tensor | int", seed: "tf.Tensor | int" = 0, rules: Rules = Rules(), *,
                   room: "int | None" = None, **layout: int) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]":
        """Every beam, best first within each prompt (`generate(return_all_beams=True)`; the
        greedy hypothesis not added): `(ids [batch·n, width], ends [batch·n], log-probabilities
        [batch·n], ranking scores [batch·n])`."""
        lengths = tf.cast(lengths, tf.int32)
        buffer, ends, scores, tiled = self.search(model, token_ids, lengths, max_new_tokens, rules, room)
        return _ranked_beams(self, buffer, ends, scores, tiled, tf.shape(lengths)[0], self.num_beams, every=True)

    def search(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
               max_new_tokens: "tf.Tensor | int", rules: Rules = Rules(),
               room: "int | None" = None) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]":
        """The beams: each of `num_beams` hypotheses per prompt extended by every token and the
        best `num_beams` of all kept (`select`); a finished hypothesis (after `rules.eos_id` or a
        stop sequence) stays as it is. Returns `(ids [batch·n, width], ends [batch·n],
        log-probabilities [batch, n], the prompts' lengths [batch·n])`, unranked."""
        hidden, state = decoding.prefill(model, token_ids, lengths)
        batch, n = tf.shape(lengths)[0], self.num_beams
        def tile(x):  # each row n times; the static shape kept (n may be a request's tensor)
            return tf.ensure_shape(tf.repeat(x, n, axis=0), [None] + x.shape[1:])

        hidden, state = tile(hidden), tf.nest.map_structure(tile, state)
        buffer = tile(decoding.prompt_buffer(token_ids, max_new_tokens if room is None else room))
        lengths = tile(lengths)
        # only the first beam of each prompt is live at the start: the others would repeat it
        scores = tf.tile(tf.concat([[0.0], tf.fill([n - 1], -np.inf)], 0)[None, :], [batch, 1])
        vocabulary_size = model.vocabulary_size
        finished_row = tf.where(tf.range(vocabulary_size) == PAD_ID, 0.0, -np.inf)[None, :]
        rows, first_beam = tf.range(batch * n), tf.repeat(tf.range(batch) * n, n)
        never = decoding.never_scores_of(rules.never, vocabulary_size)

        def body(step, done, ends, buffer, scores, hidden, state):
            log_probs = decoding.banned(decoding.next_token_scores(model, hidden, normalised=True), never, buffer,
                                        ends, rules.ngram)
            log_probs = tf.where(done[:, None], finished_row, log_probs)
            total = tf.reshape(tf.reshape(scores, [-1, 1]) + log_probs, [batch, n * vocabulary_size])
            scores, best = self.select(total)
            origin = tf.reshape(best // vocabulary_size, [-1]) + first_beam
            token = tf.reshape(best % vocabulary_size, [-1])
            pick = lambda x: tf.gather(x, origin)
            done, ends, buffer = pick(done), pick(ends), pick(buffer)
            hidden, state = pick(hidden), tf.nest.map_structure(pick, state)
            buffer = tf.tensor_scatter_nd_update(buffer, tf.stack([rows, ends], axis=1), token)
            ends += tf.cast(~done, tf.int32)
            done |= tf.equal(token, rules.eos_id) | decoding.stopped(buffer, ends, lengths, rules.stop_sequences)
            hidden, state = model.step(token, state)
            return step + 1, done, ends, buffer, scores, hidden, state

        keep_going = lambda step, done, *_: (step < max_new_tokens) & ~tf.reduce_all(done)
        loop = (tf.constant(0), tf.zeros_like(lengths, tf.bool), lengths, buffer, scores, hidden, state)
        _, _, ends, buffer, scores, _, _ = tf.while_loop(keep_going, body, loop)
        return buffer, ends, scores, lengths


def _ranked_beams(beams, buffer, ends, scores, lengths, batch, n, every=False):
    """The beams ranked by `beams.rank` (log-probability / new tokens ** length_penalty): the best
    of each prompt, `(ids, ends, log-probability, ranking score)`, or with `every` all of them,
    best first within each prompt (`Beam.every_beam`)."""
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


class Served(Sampler):
    """The exported `generate` signature's sampler: its settings are a request's tensors
    (`temperature` 0 is greedy, `top_k` 0 and `top_p` 1 are off, `num_beams` > 1 is beam search),
    and it chooses with the built-in samplers' own `next` and loops, so a served request decodes
    as `lm.generate` with that sampler does (graph loop, same seed).

    Example:

    >>> import tensorflow as tf
    >>> from zoo.models.samplers import Served
    >>> log_probs = tf.math.log([[0.1, 0.7, 0.2]])
    >>> Served(temperature=tf.constant(0.0), top_k=tf.constant(0), top_p=tf.constant(1.0)).next(
    ...     log_probs, seed=0, step=0).numpy().tolist()  # temperature 0: greedy
    [1]
    """

    request = ("temperature", "top_k", "top_p", "num_beams")

    def __init__(self, temperature: tf.Tensor, top_k: tf.Tensor, top_p: tf.Tensor,
                 num_beams: "tf.Tensor | None" = None):
        self.temperature, self.top_k, self.top_p, self.num_beams = temperature, top_k, top_p, num_beams

    def __call__(self, model: "zoo.LanguageModel", token_ids: tf.Tensor, lengths: tf.Tensor,
                 max_new_tokens: "tf.Tensor | int", seed: "tf.Tensor | int", rules: Rules = Rules(),
                 **options: Any) -> "tuple[tf.Tensor, tf.Tensor, tf.Tensor]":
        """`Sampler.__call__`'s loop choosing with `next`, or where the request's `num_beams` > 1,
        `Beam(num_beams)`'s (what `generate(sampler="beam", num_beams=k)` returns)."""
        sampled = lambda: super(Served, self).__call__(model, token_ids, lengths, max_new_tokens, seed, rules,
                                                       **options)
        if self.num_beams is None:
            return sampled()
        searched = lambda: Beam(self.num_beams)(model, token_ids, lengths, max_new_tokens, seed, rules, **options)
        return tf.cond(self.num_beams > 1, searched, sampled)

    def next(self, log_probs: tf.Tensor, seed: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        # Each request pays for its own sampler only: top-p's sort and cumulative sum run only
        # when top_p < 1, and top-k's selection only when top_k > 0 (a decoding loop's step runs
        # one branch of these conds, so the others cost nothing per token).
        vocabulary = tf.shape(log_probs)[-1]
        t, k, p = self.temperature, self.top_k, self.top_p
        top_p = lambda k: lambda: TopP(p=p, temperature=t, k=k).next(log_probs, seed, step)  # noqa: E731

        def with_k():
            return tf.cond(p < 1.0, top_p(k), lambda: TopK(k=k, temperature=t).next(log_probs, seed, step))

        def without_k():
            return tf.cond(p < 1.0, top_p(vocabulary), lambda: Random(temperature=t).next(log_probs, seed, step))

        return tf.cond(t > 0, lambda: tf.cond(k > 0, with_k, without_k), lambda: Greedy().next(log_probs, seed, step))


SAMPLERS = (Greedy, Random, TopK, TopP, Beam)
NAMES = tuple(s.name for s in SAMPLERS)


def _one_beam(num_beams):
    """Whether `num_beams` is the whole number 1: one beam, no beam search (not True or 1.0)."""
    return isinstance(num_beams, numbers.Integral) and not isinstance(num_beams, bool) and num_beams == 1


def _implied(temperature, top_k, top_p, num_beams, length_penalty):
    """The sampler's name when `generate` is given none, as it always chose: beams, then top-p,
    then top-k, then a draw from the whole distribution."""
    if num_beams is not None and not _one_beam(num_beams) or length_penalty is not None:
        return "beam"
    if top_p is not None:
        return "top_p"
    if top_k is not None:
        return "top_k"
    return "random"  # num_beams=1 is no beam search, as the exported signature reads it


def resolve(sampler: "str | Sampler | None" = None, temperature: "float | None" = None, top_k: "int | None" = None,
            top_p: "float | None" = None, num_beams: "int | None" = None, length_penalty: "float | None" = None,
            vocabulary_size: "int | None" = None) -> Sampler:
    """The sampler `generate` uses, from its arguments.

    `sampler` is a `Sampler` object, a registered name (its parameters from the keyword
    arguments), or None: then `temperature=0` is greedy, `num_beams` > 1 or a `length_penalty`
    beam search (`num_beams=1` alone is none, as the exported `generate` signature reads it, so
    any sampler but a `Beam` object takes it), `top_p`
    nucleus sampling, `top_k` top-k sampling, and otherwise a draw from the whole distribution at
    `temperature` (1.0 by default). A keyword argument the sampler does not take is refused,
    naming it; so are a `top_k` and a `num_beams` above `vocabulary_size`.

    Args:
        sampler: a `Sampler` object, a registered name ("greedy", "random", "top_k", "top_p",
            "beam"), or None (the sampler the other arguments imply).
        temperature, top_k, top_p, num_beams, length_penalty: `generate`'s keyword arguments of
            that name (None: not given).
        vocabulary_size: the model's; `top_k` and `num_beams` may not exceed it (None: unchecked).

    Returns:
        The `Sampler`: `sampler` itself when it is one, else a new one of the registered class.

    Raises:
        ValueError: in one sentence, for an unknown sampler, a parameter out of range, or one the
            sampler does not take (or, with a `Sampler` object, any parameter given beside it).

    Example:

    >>> from zoo.models.samplers import resolve
    >>> resolve(temperature=0)
    Greedy()
    >>> resolve("top_k", top_k=40, temperature=0.8)
    TopK(k=40, temperature=0.8)
    >>> resolve(top_p=0.9), resolve(num_beams=4)
    (TopP(p=0.9, temperature=1.0, k=None), Beam(num_beams=4, length_penalty=1.0))
    >>> resolve("greedy", top_k=3)
    Traceback (most recent call last):
    ...
    ValueError: The greedy sampler does not take top_k; it takes no parameter.
    """
    zero = isinstance(temperature, numbers.Real) and not isinstance(temperature, bool) and temperature == 0
    if temperature is not None and not zero:  # 0 is greedy, or refused by a sampler that draws
        _check_temperature(temperature)
    if top_k is not None:
        _check_k(top_k, vocabulary_size)
    given = {k: v for k, v in dict(temperature=temperature, top_k=top_k, top_p=top_p, num_beams=num_beams,
                                   length_penalty=length_penalty).items() if v is not None}
    if isinstance(sampler, Sampler) and not isinstance(sampler, Beam) and _one_beam(num_beams):
        given.pop("num_beams")  # one beam: no beam search, whichever sampler chooses
    if isinstance(sampler, Sampler):
        if given:
            raise ValueError(f"Give the sampler's parameters to the sampler object {sampler!r}, not also as "
                             f"{', '.join(sorted(given))}.")
        if getattr(sampler, "k", None) is not None:
            _check_k(sampler.k, vocabulary_size)
        return _check_beams(sampler, vocabulary_size)
    if sampler is None:
        if zero and (num_beams is None or _one_beam(num_beams)) and length_penalty is None:
            return Greedy()  # as generate always did: temperature=0 is greedy, whatever top_k says
        sampler = _implied(temperature, top_k, top_p, num_beams, length_penalty)
    if not isinstance(sampler, str) or sampler not in REGISTERED:
        raise ValueError(f"Unknown sampler {sampler!r}; expected one of {list(REGISTERED)} or a zoo.samplers "
                         "object (Greedy, Random, TopK, TopP, Beam).")
    cls = REGISTERED[sampler]
    if cls is Greedy and given.get("temperature") == 0:
        given.pop("temperature")
    if cls is not Beam and _one_beam(given.get("num_beams")):
        given.pop("num_beams")  # one beam: no beam search, whichever sampler chooses
    extra = sorted(set(given) - set(cls.keywords))
    if extra:
        raise ValueError(f"The {sampler} sampler does not take {', '.join(extra)}; it takes "
                         f"{', '.join(cls.keywords) or 'no parameter'}.")
    return _check_beams(cls.from_keywords(given), vocabulary_size)


def _check_beams(sampler, vocabulary_size):
    """`sampler`, unless it keeps more beams than the vocabulary has ids (each step keeps the best
    `num_beams` of beams × vocabulary extensions; more beams than ids only repeat the hopeless)."""
    beams = getattr(sampler, "num_beams", None)
    if isinstance(sampler, Beam) and vocabulary_size is not None and beams > vocabulary_size:
        raise ValueError(f"num_beams must be in [1, {vocabulary_size}] (the vocabulary size), got {beams}.")
    return sampler


__all__ = ["Sampler", "Greedy", "Random", "TopK", "TopP", "Beam", "Served", "resolve", "NAMES", "SAMPLERS"]
