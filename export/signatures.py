"""The four serving signatures of an exported language model.

Every signature takes and returns named tensors (dict outputs), batch first:

- `serving_default`: `text` string [batch] → `token_log_probs` float32 [batch, time] (padded
  with 0), `lengths` int32 [batch], `log_prob` float32 [batch], `perplexity` float32 [batch];
  each line is tokenised in the graph and wrapped in `<s> … </s>` as in training, and the scored
  tokens are `w1 … wn </s>`, what `LanguageModel.score(text)` returns;
- `score_ids`: `token_ids` int32 [batch, time] and `lengths` int32 [batch] (valid ids per row,
  the rest being padding; one per row, each in [0, time], or an InvalidArgument) → the same four
  outputs, row i scoring tokens 1 … lengths[i]−1 given what precedes them (what `score(ids)`
  returns), so `lengths` out = `lengths` in − 1;
- `next_token`: `text` string [batch] (prefixes, wrapped as `<s> w1 … wn`) and `k` int32 (one
  value, or one per prefix) → `words` string [batch, K], `ids` int32 [batch, K], `log_probs`
  float32 [batch, K], the k most likely next tokens (never `<pad>`, `<s>` or a subword
  `<unk>`, as in `generate`), K the largest k; a row asking for fewer has "", −1 and 0.0 past its k;
- `decode_step`: `token_ids` int32 [batch] and the decoding state (see `zoo.export.state`) →
  `log_probs` float32 [batch, vocabulary] and the next state under the same names;
- `generate`: `text` string [batch] (prompts, read as `<s> w1 … wn`, the last `max_tokens`
  tokens of a longer one, for subword models from the first of them that starts a word) and the
  optional scalars `max_new_tokens` int32 (default 20, at most the export's `max_new_tokens`
  cap), `temperature` float32 (1.0; 0 is greedy), `top_k` int32 (0: off), `top_p` float32 (1.0:
  off), `seed` int32 (0), `num_beams` int32 (1; k in [2, 16] is beam
  search's best answer, what `generate(sampler="beam", num_beams=k)` returns, the sampling inputs
  then unused) → `text` string [batch] (the prompt and its
  continuation, detokenised, what `LanguageModel.generate` returns), `completion` string [batch]
  (the continuation alone), `ids` int32 [batch, new] (the new ids, `<pad>` after a row's end) and
  `lengths` int32 [batch] (new tokens per row). The whole loop runs in the graph (the
  sampler's own loop, `zoo.models.samplers.Sampler.__call__` or beam search's, the loop
  `generate` runs in-process, so the same settings and seed give the same tokens); a row ends
  after `</s>`. The optional inputs are the SignatureDef's `defaults`, which TF Serving fills in
  when a request leaves them out; a value outside its range is an InvalidArgument naming the
  input and the range. An export with a sampler of its own (`export_saved_model(sampler=...)`)
  runs that sampler, its parameters fixed at export except those it lists in `request`, which
  become inputs of their own (named by its `keywords`; a request leaving one out gets the
  sampler's value); the sampling inputs it does not list are then unused.

Subword models (whose tokenizer's `scores_per_word` is true, a SentencePiece `SubwordTokenizer`): the model
scores pieces, but `serving_default` answers per WORD, as `LanguageModel.score(text)` does: its
"tokens" are the whitespace-separated words of the normalised text and `</s>`, a word's
log-probability being the sum of its pieces' (summed in float64, as `score` does), `lengths` =
words + 1 and `perplexity` per word (saturating at float32's largest value, 3.4e38, rather than
overflowing to infinity when words of many unlikely pieces average below −88.7 nats). A piece
starts a word when its text starts with the boundary mark U+2581 (and a line's first piece
always does), as `SubwordTokenizer.word_index` decides; in
the graph a per-id boolean table is gathered by id, cumulated and the pieces' log-probabilities
are summed per word with `unsorted_segment_sum`. `score_ids` and `decode_step` stay per piece (ids
are pieces); `next_token` gives the k most likely next pieces, `words` being each piece's
readable text (`token_texts`: " the" with a leading space for a piece that starts a word, a byte
piece as its character or a `\\xNN` escape).

Over-long lines: a line (or prefix) of more than `max_tokens` tokens is cut. For word and
character models, tokens are words (characters): `serving_default` keeps the first `max_tokens`
tokens and scores them exactly as the in-process model does (their log-probabilities are those
of the whole line: the models are causal), but scores no `</s>` after a cut line, so a cut line
has `lengths = max_tokens` where a whole line of n tokens has n + 1. For subword models the cut
is on pieces and falls at a word boundary: a line of more than `max_tokens` pieces keeps the
words that lie wholly within its first `max_tokens` pieces (a word cut in two is dropped with
everything after it) and scores no `</s>`, so a client sees `lengths` = the number of whole
words kept, fewer than the line's words + 1; their scores are the whole line's (0 words, with
`log_prob` 0 and `perplexity` 1, when the first word alone has more than `max_tokens` pieces).
`next_token` keeps the last `max_tokens` tokens (pieces for subword) of a prefix, after `<s>`;
`generate` keeps the last `max_tokens` of a prompt, for subword models from the first of those
pieces that starts a word (all of them where none does).

An empty batch (no rows of `text` or `token_ids`) gets outputs of no rows from every signature
(`serving_default`, `score_ids`, `next_token` and `generate` run the model on one stand-in row:
TensorFlow's CPU convolution gives a wrongly shaped result for an empty batch).

The mixture-of-experts layers run their inference path (no gate noise, `training=False`) with
the same sparse dispatch as in training.
"""

import inspect

import tensorflow as tf

from zoo.export.state import StateLayout
from zoo.models import generation, samplers

FLOAT32_MAX = 3.4028234663852886e38  # where a subword model's per-word perplexity saturates
MAX_BEAMS = 16  # the most beams a served `generate` request may ask for
GENERATE_INPUTS = ("text", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "num_beams")
NOT_SAMPLER_INPUTS = ("text", "max_new_tokens", "seed")  # generate's own, which no sampler parameter takes


def request_inputs(sampler):
    """`{input name: parameter}`: the `generate` inputs that feed the parameters `sampler` lists in
    `request` (`Served`'s for None), each named as its `keywords` name it (else as the parameter).
    Refused in one sentence where a name is not one of the sampler's parameters or is one of
    generate's own inputs."""
    if sampler is None:
        return {name: name for name in samplers.Served.request}
    named = {parameter: keyword for keyword, parameter in sampler.keywords.items()}
    inputs = {named.get(parameter, parameter): parameter for parameter in sampler.request}
    for name, parameter in inputs.items():
        if parameter not in sampler.parameters():
            raise ValueError(f"The sampler {sampler!r} lists {parameter!r} in request, which is not one of its "
                             f"parameters ({', '.join(sampler.parameters()) or 'none'}).")
        if name in NOT_SAMPLER_INPUTS:
            raise ValueError(f"The sampler {sampler!r} lists {parameter!r} in request, which would be generate's "
                             f"own input {name!r}: name it otherwise.")
    return inputs


def _one_row_at_least(x, value, columns=False):
    """`x` with one row of `value` added where it has none (and, `columns`, one column where a 2-D
    `x` has none). The model never sees an empty batch (TensorFlow's CPU convolution gives a
    wrongly shaped result for one); a signature asked about no rows answers for this stand-in row
    and returns the first 0 rows of each output."""
    pads = [[0, tf.maximum(1 - tf.shape(x)[0], 0)]] + [[0, 0]] * (x.shape.rank - 1)
    if columns:
        pads[1] = [0, tf.maximum(1 - tf.shape(x)[1], 0)]
    return tf.pad(x, pads, constant_values=value)


class Signatures:
    """The signature functions of `model`, tokenising with `tokenizer` (`zoo.data.graph_tokenizers`)."""

    def __init__(self, model, tokenizer, max_tokens, max_new_tokens=256, sampler=None, head_blocks=None):
        self.model = model
        # generate's output layer at a few rows, in this many blocks (None: a default that holds
        # up across machines' caches, not the exporting machine's)
        self.head_blocks = generation.export_head_blocks(model, head_blocks)
        self.sampler = sampler  # None: the request's temperature, top_k, top_p and num_beams choose
        self.request_inputs = request_inputs(sampler)  # {input name: the sampler's parameter it feeds}
        self.tokenizer = tokenizer
        self.scores_per_word = model.tokenizer.scores_per_word  # serving_default answers per word
        self.max_tokens = int(max_tokens)
        self.max_new_tokens = int(max_new_tokens)
        self.vocabulary_size = int(model.vocabulary_size)
        self.state = StateLayout(model)
        # One traced function scores ids for both serving_default and score_ids (one trace of
        # the model instead of two).
        self._score = tf.function(self._score_ids_and_lengths, autograph=False, input_signature=[
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)])

    # ---- the signatures, name -> (function, input signature) ---------------------------
    def all(self):
        return {
            "serving_default": (self.serving_default, [tf.TensorSpec([None], tf.string, name="text")]),
            "score_ids": (self.score_ids, [tf.TensorSpec([None, None], tf.int32, name="token_ids"),
                                           tf.TensorSpec([None], tf.int32, name="lengths")]),
            "next_token": (self.next_token, [tf.TensorSpec([None], tf.string, name="text"),
                                             tf.TensorSpec(None, tf.int32, name="k")]),
            "decode_step": (self.decode_step, [tf.TensorSpec([None], tf.int32, name="token_ids")]
                            + self.state.tensor_specs()),
            "generate": (self.generate_function(), self.generate_specs()),
        }

    def generate_specs(self):
        """`generate`'s inputs: `GENERATE_INPUTS`, then those of an exported sampler's `request`
        parameters that are not among them."""
        specs = [tf.TensorSpec([None], tf.string, name="text"), tf.TensorSpec([], tf.int32, name="max_new_tokens"),
                 tf.TensorSpec([], tf.float32, name="temperature"), tf.TensorSpec([], tf.int32, name="top_k"),
                 tf.TensorSpec([], tf.float32, name="top_p"), tf.TensorSpec([], tf.int32, name="seed"),
                 tf.TensorSpec([], tf.int32, name="num_beams")]
        return specs + [self.sampler.tensor_spec(parameter, name) for name, parameter in self.request_inputs.items()
                        if name not in GENERATE_INPUTS]

    def generate_defaults(self):
        """The optional inputs of `generate` and their values when a request leaves them out: an
        exported sampler's own value for each of its `request` parameters."""
        defaults = {"max_new_tokens": min(20, self.max_new_tokens), "temperature": 1.0, "top_k": 0, "top_p": 1.0,
                    "seed": 0, "num_beams": 1}
        if self.sampler is not None:
            defaults.update({name: self.sampler.parameters()[parameter]
                             for name, parameter in self.request_inputs.items()})
        return defaults

    def sampler_description(self):
        """What `zoo_export.json` records of an exported sampler (None: the request's, `Served`):
        its class, its parameters fixed at export and those each request gives."""
        if self.sampler is None:
            return {}
        request = set(self.request_inputs.values())
        plain = lambda value: value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)
        return {"sampler": repr(self.sampler),
                "sampler_class": f"{type(self.sampler).__module__}.{type(self.sampler).__qualname__}",
                "sampler_parameters": {"fixed": {name: plain(value) for name, value in self.sampler.parameters().items()
                                                 if name not in request},
                                       "request": {name: parameter for name, parameter in self.request_inputs.items()}}}

    def outputs(self, endpoint):
        """`{output name: dtype}` of a signature."""
        scores = {"token_log_probs": "float32", "lengths": "int32", "log_prob": "float32",
                  "perplexity": "float32"}
        return {
            "serving_default": scores,
            "score_ids": scores,
            "next_token": {"words": "string", "ids": "int32", "log_probs": "float32"},
            "generate": {"text": "string", "completion": "string", "ids": "int32", "lengths": "int32"},
            "decode_step": {"log_probs": "float32", **{name: "float32" for name in self.state.specs}},
        }[endpoint]

    def serving_default(self, text):
        if self.scores_per_word:
            return self._serving_default_per_word(text)
        t = self.tokenizer
        words = t.encode(text)
        cut = words.row_lengths() > self.max_tokens
        words = words[:, : self.max_tokens]
        n = tf.shape(text, out_type=tf.int64)[0]
        bos = tf.RaggedTensor.from_tensor(tf.fill([n, 1], t.bos_id))
        eos = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(~cut, tf.int64))], t.eos_id), tf.cast(~cut, tf.int64))
        ids = tf.concat([bos, words, eos], axis=1)
        return self._score(ids.to_tensor(t.pad_id), tf.cast(ids.row_lengths(), tf.int32))

    def score_ids(self, token_ids, lengths):
        time = tf.shape(token_ids)[1]
        within = "score_ids: lengths must be in [0, the width of token_ids]"
        checks = [
            tf.debugging.assert_equal(tf.size(lengths), tf.shape(token_ids)[0],
                                      message="score_ids: lengths must have one value per row of token_ids"),
            tf.debugging.assert_non_negative(lengths, message=within),
            tf.debugging.assert_less_equal(lengths, time, message=within),
        ]
        with tf.control_dependencies(checks):
            lengths = tf.identity(lengths)
        valid = tf.sequence_mask(lengths, time)
        token_ids = tf.where(valid, token_ids, 0)  # whatever pads the rows
        token_ids = self._check_ids(token_ids)
        return self._score(token_ids, lengths)

    def next_token(self, text, k):
        t = self.tokenizer
        words = t.encode(text)
        # the last max_tokens words of a long prefix
        start = tf.maximum(words.row_lengths() - self.max_tokens, 0)
        keep = tf.ragged.range(start, words.row_lengths())
        words = tf.gather(words, keep, batch_dims=1)
        n = tf.shape(text)[0]
        ids = tf.concat([tf.RaggedTensor.from_tensor(tf.fill([n, 1], t.bos_id)), words], axis=1)
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        dense = ids.to_tensor(t.pad_id)
        hidden = self.model.served_hidden(_one_row_at_least(dense, t.pad_id, columns=True))
        last = tf.gather(hidden, _one_row_at_least(lengths, 1) - 1, batch_dims=1)
        log_probs = tf.cast(self.model.head.log_prob(last), tf.float32)[:n]
        # never <pad> or <s> (nor a subword tokenizer's <unk>), as in LanguageModel.generate
        candidates = log_probs + generation.never_scores(self.model)[None, :]
        k = tf.reshape(tf.cast(k, tf.int32), [-1])
        k = tf.cond(tf.equal(tf.size(k), 1), lambda: tf.fill([n], k[0]), lambda: k)
        with tf.control_dependencies([tf.debugging.assert_equal(
                tf.size(k), n, message="next_token: give k once, or once per text")]):
            k = tf.clip_by_value(k, 0, self.vocabulary_size - len(generation.never_emitted(self.model)))
        top = tf.reduce_max(tf.concat([k, [0]], 0))
        values, indices = tf.math.top_k(candidates, top)
        inside = tf.range(top)[None, :] < k[:, None]
        return {
            "words": tf.where(inside, self._token_names(indices), ""),
            "ids": tf.where(inside, indices, -1),
            "log_probs": tf.where(inside, values, 0.0),
        }

    def generate_function(self):
        """`generate` with its optional inputs' defaults as Python defaults of the function (its
        `__signature__`, one parameter per input of `generate_specs`), which
        `tf.saved_model.save` writes into the SignatureDef's `defaults`."""
        d = self.generate_defaults()
        parameters = [inspect.Parameter(spec.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=inspect.Parameter.empty if spec.name == "text" else
                                        tf.constant(d[spec.name], spec.dtype)) for spec in self.generate_specs()]
        signature = inspect.Signature(parameters)

        def generate(*args, **kwargs):
            given = signature.bind(*args, **kwargs)
            given.apply_defaults()
            inputs = dict(given.arguments)
            standard = [inputs.pop(name) for name in GENERATE_INPUTS]
            return self.generate(*standard, **inputs)

        generate.__signature__ = signature
        return generate

    def _request_checks(self, max_new_tokens, temperature, top_k, top_p, num_beams):
        """The assertions on a `generate` request's parameters, each failing with one sentence."""
        v, cap = self.vocabulary_size, self.max_new_tokens
        beams = f"num_beams must be in [1, {MAX_BEAMS}] (1: no beam search)"
        return [
            tf.debugging.assert_greater_equal(max_new_tokens, 1, message=f"max_new_tokens must be in [1, {cap}] "
                                              "(the export's cap, zoo export --max-new-tokens)"),
            tf.debugging.assert_less_equal(max_new_tokens, cap, message=f"max_new_tokens must be in [1, {cap}] "
                                           "(the export's cap, zoo export --max-new-tokens)"),
            tf.debugging.assert_greater_equal(temperature, 0.0, message="temperature must be >= 0 (0 is greedy)"),
            tf.debugging.assert_less_equal(temperature, 3.4e38, message="temperature must be a finite number >= 0"),
            tf.debugging.assert_greater_equal(top_k, 0, message=f"top_k must be in [0, {v}] (0: off)"),
            tf.debugging.assert_less_equal(top_k, v, message=f"top_k must be in [0, {v}] (0: off)"),
            tf.debugging.assert_greater(top_p, 0.0, message="top_p must be in (0, 1] (1: off)"),
            tf.debugging.assert_less_equal(top_p, 1.0, message="top_p must be in (0, 1] (1: off)"),
            tf.debugging.assert_greater_equal(num_beams, 1, message=beams),
            tf.debugging.assert_less_equal(num_beams, MAX_BEAMS, message=beams),
        ]

    def generate(self, text, max_new_tokens, temperature, top_k, top_p, seed, num_beams=None, **extra):
        t = self.tokenizer
        num_beams = tf.constant(1, tf.int32) if num_beams is None else num_beams
        with tf.control_dependencies(self._request_checks(max_new_tokens, temperature, top_k, top_p, num_beams)):
            max_new_tokens = tf.identity(max_new_tokens)
        words = t.encode(text)
        words = tf.gather(words, tf.ragged.range(self._prompt_start(words), words.row_lengths()), batch_dims=1)
        n = tf.shape(text)[0]
        prompts = tf.concat([tf.RaggedTensor.from_tensor(tf.fill([n, 1], t.bos_id)), words], axis=1)
        sampler = self.request_sampler(dict(temperature=temperature, top_k=top_k, top_p=top_p, num_beams=num_beams,
                                            **extra))
        seed = tf.math.floormod(tf.cast(seed, tf.int64), 2**31)  # as LanguageModel.generate maps it
        # an empty batch: one stand-in prompt of one token, one new token, then no rows kept
        dense = _one_row_at_least(prompts.to_tensor(t.pad_id), t.pad_id, columns=True)
        lengths = _one_row_at_least(tf.cast(prompts.row_lengths(), tf.int32), 1)
        max_new_tokens = tf.where(n > 0, max_new_tokens, 1)

        with generation.loop_invariants(self.model):  # the sampler's loop, laid out as exported
            ids, ends, _ = sampler(self.model, dense, lengths, max_new_tokens, seed,
                                   generation.rules(self.model, t.eos_id), groups=generation.GROUPS,
                                   head_blocks=self.head_blocks)
        ids, ends, lengths = ids[:n], ends[:n], lengths[:n]
        new = tf.gather(ids, tf.ragged.range(lengths, ends), batch_dims=1)
        whole = tf.gather(ids, tf.ragged.range(ends), batch_dims=1)
        return {
            "text": t.decode(whole, whole_characters=True),  # as lm.generate writes them
            "completion": t.decode(new, whole_characters=True),
            "ids": new.to_tensor(t.pad_id, shape=[None, None]),
            "lengths": tf.cast(new.row_lengths(), tf.int32),
        }

    def request_sampler(self, inputs):
        """The sampler of one request, `inputs` being `{input name: tensor}`: `Served` on the
        request's sampling inputs, or the exported sampler with its `request` parameters given
        by them (tensors, which its constructor's checks leave alone)."""
        given = {parameter: inputs[name] for name, parameter in self.request_inputs.items()}
        return samplers.Served(**given) if self.sampler is None else self.sampler.bound(**given)

    def _prompt_start(self, tokens):
        """Where each prompt's kept tokens start (ragged `tokens` [batch, tokens]): its last
        `max_tokens` tokens. The cut falls at a word boundary, as a subword model's serving_default's
        does: from the first token among them that starts a word (a word cut in two is dropped),
        or all of them where none does (one word of more than `max_tokens` pieces). Every token of
        a word or character model starts a word (`starts_word`), so its cut is the last
        `max_tokens` tokens."""
        count = tokens.row_lengths()
        start = tf.maximum(count - self.max_tokens, 0)
        position = tf.ragged.range(count)
        rows = position.value_rowids()
        kept_start = self.tokenizer.starts_word(tokens).flat_values & (position.flat_values >= tf.gather(start, rows))
        first = tf.math.unsorted_segment_min(tf.where(kept_start, position.flat_values, count.dtype.max), rows,
                                             tf.shape(count, out_type=rows.dtype)[0])
        return tf.where((start > 0) & (first < count), first, start)

    def decode_step(self, token_ids, *state):
        token_ids = self._check_ids(token_ids)
        rows = tf.shape(token_ids)[0]
        checks = [tf.debugging.assert_equal(tf.shape(value)[0], rows,
                                            message=f"decode_step: {name} must have one row per token id")
                  for name, value in zip(self.state.specs, state)]
        with tf.control_dependencies(checks):
            state = [tf.identity(value) for value in state]
        named = dict(zip(self.state.specs, state))
        nested = self.state.unflatten(named, tf.shape(token_ids)[0])
        hidden, nested = self.model.step(token_ids, nested)
        out = {"log_probs": tf.cast(self.model.head.log_prob(hidden), tf.float32)}
        out.update({name: tf.cast(value, tf.float32) for name, value in self.state.flatten(nested).items()})
        return out

    # ---- subword models: per-word scores -------------------------------------------------------
    def _serving_default_per_word(self, text):
        t = self.tokenizer
        pieces = t.encode(text)  # ragged [batch, pieces]
        n = tf.shape(text, out_type=tf.int64)[0]
        count = pieces.row_lengths()
        position = tf.ragged.range(count)
        # a line's first piece starts its first word, whatever it is (SubwordTokenizer.word_index)
        starts = t.starts_word(pieces)
        starts = starts.with_flat_values(starts.flat_values | tf.equal(position.flat_values, 0))
        # A cut line ends at the last word start at or before piece max_tokens: the words wholly
        # within the first max_tokens pieces are kept, a word cut in two is dropped.
        cut = count > self.max_tokens
        boundary = starts.flat_values & (position.flat_values <= self.max_tokens)
        last_start = tf.math.unsorted_segment_max(
            tf.where(boundary, position.flat_values, 0), position.value_rowids(), n)
        keep = tf.where(cut, tf.maximum(last_start, 0), count)
        kept = position.with_flat_values(position.flat_values < tf.gather(keep, position.value_rowids()))
        pieces = tf.ragged.boolean_mask(pieces, kept)
        starts = tf.ragged.boolean_mask(starts, kept)
        whole = tf.cast(~cut, tf.int64)
        bos = tf.RaggedTensor.from_tensor(tf.fill([n, 1], t.bos_id))
        eos = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(whole)], t.eos_id), whole)
        ids = tf.concat([bos, pieces, eos], axis=1)
        scores = self._score(ids.to_tensor(t.pad_id), tf.cast(ids.row_lengths(), tf.int32))
        # the word-start flags of the scored tokens (the pieces, then </s>, a word of its own)
        eos_starts = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(whole)], True), whole)
        target_starts = tf.concat([starts, eos_starts], axis=1).to_tensor(False)
        return self._per_word(scores, target_starts)

    def _per_word(self, scores, target_starts):
        """Per-piece `scores` (`_score`'s) → per-word scores, `target_starts` [batch, targets]
        saying which scored tokens start a word."""
        piece_log_probs = scores["token_log_probs"]
        width = tf.shape(piece_log_probs)[1]
        target_starts = target_starts[:, :width]
        target_starts = tf.pad(target_starts, [[0, 0], [0, width - tf.shape(target_starts)[1]]])
        valid = tf.sequence_mask(scores["lengths"], width)
        target_starts = target_starts & valid
        word = tf.cumsum(tf.cast(target_starts, tf.int32), axis=1) - 1  # the word of each target
        words = tf.reduce_sum(tf.cast(target_starts, tf.int32), axis=1)
        batch = tf.shape(piece_log_probs)[0]
        segment = tf.where(valid, tf.range(batch)[:, None] * width + word, -1)  # -1: dropped
        summed = tf.math.unsorted_segment_sum(tf.cast(piece_log_probs, tf.float64), segment, batch * width)
        word_log_probs = tf.reshape(summed, [batch, width])[:, : tf.reduce_max(tf.concat([words, [0]], 0))]
        total = tf.reduce_sum(word_log_probs, axis=1)
        return {
            "token_log_probs": tf.cast(word_log_probs, tf.float32),
            "lengths": words,
            "log_prob": tf.cast(total, tf.float32),
            # per word it can pass float32's range (a word of many rare pieces): it saturates
            "perplexity": tf.cast(tf.minimum(tf.exp(-total / tf.cast(tf.maximum(words, 1), tf.float64)),
                                             FLOAT32_MAX), tf.float32),
        }

    def _token_names(self, ids):
        """`next_token`'s `words`: each id's name in its vocabulary (`token_names`: a word, a
        character with U+2581 for a space, a subword piece's readable text)."""
        return self.tokenizer.token_names(ids)

    # ---- shared pieces -----------------------------------------------------------------------
    def _check_ids(self, token_ids):
        v = self.vocabulary_size
        checks = [
            tf.debugging.assert_non_negative(token_ids, message=f"token_ids must be in [0, {v - 1}]"),
            tf.debugging.assert_less(token_ids, v, message=f"token_ids must be in [0, {v - 1}]"),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(token_ids)

    def _score_ids_and_lengths(self, ids, lengths):
        """`ids` [batch, time] (padded), `lengths` [batch] valid ids per row: the log-probability
        of ids 1 … lengths−1 of each row given what precedes them.

        A batch of one takes its own branch, traced with the batch axis known: kernels with a
        static batch size run faster (`zoo benchmark serving`; see docs/benchmarks.md), and one
        sentence per request is TF Serving's common case."""
        # At least two columns, so that inputs and targets are never empty, and one row.
        n = tf.shape(ids)[0]
        ids = _one_row_at_least(tf.pad(ids, [[0, 0], [0, tf.maximum(2 - tf.shape(ids)[1], 0)]]), 0)
        lengths = _one_row_at_least(lengths, 0)
        scores = tf.cond(
            tf.equal(tf.shape(ids)[0], 1),
            lambda: self._scores(tf.ensure_shape(ids, [1, None]), tf.ensure_shape(lengths, [1])),
            lambda: self._scores(ids, lengths),
        )
        return {name: value[:n] for name, value in scores.items()}

    def _scores(self, ids, lengths):
        inputs, targets = ids[:, :-1], ids[:, 1:]
        scored = tf.maximum(lengths - 1, 0)
        mask = tf.sequence_mask(scored, tf.shape(targets)[1])
        hidden = self.model.served_hidden(inputs)  # a served graph keeps no state
        log_probs = tf.cast(self.model.head.target_log_prob(hidden, targets), tf.float32)
        token_log_probs = tf.where(mask, log_probs, 0.0)
        total = tf.reduce_sum(token_log_probs, axis=1)
        return {
            "token_log_probs": token_log_probs,
            "lengths": scored,
            "log_prob": total,
            "perplexity": tf.exp(-total / tf.cast(tf.maximum(scored, 1), tf.float32)),
        }
