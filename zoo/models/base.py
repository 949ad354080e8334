"""What every language model of the zoo shares: the loss, scoring, decoding and presets.

A model family is a subclass of `LanguageModel`. Defining one registers it (`zoo.registry`), so
that preset directories naming it load, and checks that it provides the contract below; a family
missing a piece is refused when its class is defined, naming the piece.

- `__init__(vocabulary_size, ..., cutoffs=None, optimizer=None, **kwargs)`: call
  `super().__init__(vocabulary_size=..., optimizer=..., **kwargs)` first, create the layers (one
  attribute per layer; the output layer as `self.head = self.make_head(cutoffs)`), and end with
  `self.build()`.
- `build(input_shape=None)`: `super().build(input_shape)` first (it builds the output layer),
  then every other weight from shapes alone, by building each sublayer (`layer.build(shape)`),
  never by running a forward pass. Parameter counts come from this (`zoo.registry.count_params`
  builds inside a `tf.Graph`, where nothing is allocated).
- `call(token_ids, training=None)` → hidden states `[batch, time, hidden_dim]`, causal in time.
- `hidden_dim` (property): the width `call` returns, the output layer's input.
- `stream_context` (property): tokens of left context a stream-protocol window needs.
- `initial_state(batch_size)` → a nested list of tensors (batch first), and
  `step(token_ids [batch], state)` → `(hidden [batch, hidden_dim], state)`, giving position by
  position exactly what `call` gives.
- `state_name(path)`: the name the `decode_step` serving signature gives the state tensor at
  `path` (indices into the nesting of `initial_state`); the default is `state_<i>_<j>`.
- `get_config()`: `super().get_config()` updated with every `__init__` argument.

`call` returns the hidden states rather than the distribution so that `fit` never builds a
`[tokens, vocabulary]` tensor it does not need: `compute_loss` hands the hidden states and the
targets to the output layer. `predict` and `log_probs` return the log-distribution.
"""

import functools
import json
import math
import os

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from zoo import metrics as zoo_metrics
from zoo import registry
from zoo.data import pipeline
from zoo.data.vocab import Vocabulary
from zoo.layers import AdaptiveSoftmax, FullSoftmax
from zoo.registry import CONFIG_FILE, WEIGHTS_FILE

# What a family must define itself (see the module docstring); inherited versions do not count.
CONTRACT = ("__init__", "build", "call", "hidden_dim", "stream_context", "initial_state", "step", "get_config")


def keras_fit_breaks_multi_worker():
    """Keras 3's `fit` under `MultiWorkerMirroredStrategy` fails (keras-team/keras#20585, still
    open at 3.15); a Keras release that fixes it can be let through here."""
    return int(keras.version().split(".")[0]) == 3


def _build_once(build):
    @functools.wraps(build)
    def build_once(self, input_shape=None):
        if not self.built:
            build(self, input_shape)

    return build_once


class LanguageModel(keras.Model):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = [name for name in CONTRACT if name not in cls.__dict__]
        if missing:
            raise TypeError(
                f"The model family {cls.__name__} does not define {', '.join(missing)}: a LanguageModel "
                "subclass must define each of " + ", ".join(CONTRACT) + " (see zoo/models/base.py)."
            )
        # A family's build runs once: building a built model again would add every weight twice.
        cls.build = _build_once(cls.__dict__["build"])
        registry.register_family(cls)
        # Keras' registry too, so that `keras.saving.load_model` reads .keras files of the family.
        name = f"zoo>{cls.__name__}"
        if keras.saving.get_registered_object(name) is None:
            keras.saving.register_keras_serializable(package="zoo")(cls)

    def __init__(self, vocabulary_size, optimizer=None, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.optimizer_config = optimizer
        self.vocabulary = None
        self.perplexity_tracker = zoo_metrics.Perplexity(name="perplexity")

    def make_head(self, cutoffs=None, factor=4):
        """The output layer: a full softmax, or an adaptive softmax when `cutoffs` are given."""
        if cutoffs:
            return AdaptiveSoftmax(self.vocabulary_size, list(cutoffs), factor=factor, name="head")
        return FullSoftmax(self.vocabulary_size, name="head")

    def build(self, input_shape=None):
        """Builds the output layer. A family's `build` calls this first, then builds its own
        layers: unseeded Keras initialisers draw their seeds when created, and this order (the
        output layer, then the layers bottom up) is the one every release of the zoo has used, so
        a model made after `keras.utils.set_random_seed(s)` starts from the same weights."""
        if not self.head.built:
            self.head.build((None, self.hidden_dim))

    def state_name(self, path):
        """The serving name of the decoding-state tensor at `path` in `initial_state`'s nesting."""
        return "state_" + "_".join(str(i) for i in path)

    # ---- training ------------------------------------------------------------------
    def compile(self, optimizer=None, loss=None, **kwargs):
        """With no optimizer: the preset's own recipe (by default the paper's §4.2–4.3:
        Nesterov momentum 0.99, learning rate 1, gradient clipping at norm 0.1).
        The loss is always the output layer's exact per-token negative log-likelihood."""
        if loss is not None:
            raise ValueError(
                "A language model of the zoo computes its own loss (the output layer's "
                f"negative log-likelihood); got loss={loss!r}. Leave `loss` unset."
            )
        if optimizer is None:
            optimizer = self.make_optimizer()
        super().compile(optimizer=optimizer, **kwargs)

    def fit(self, *args, **kwargs):
        strategy = getattr(self, "distribute_strategy", None) or tf.distribute.get_strategy()
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and keras_fit_breaks_multi_worker():
            raise RuntimeError(
                f"model.fit does not work under MultiWorkerMirroredStrategy in Keras {keras.version()} "
                "(keras-team/keras#20585); train with `zoo train --strategy multi_worker_mirrored` "
                "(zoo.training.train) instead."
            )
        return super().fit(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        nll = self.head.loss(y_pred, y)
        if sample_weight is None:
            sample_weight = ops.ones_like(nll)
        sample_weight = ops.cast(sample_weight, "float32")
        total = ops.sum(nll * sample_weight)
        count = ops.sum(sample_weight)
        self.perplexity_tracker.update_state(total, count)
        # Replica gradients are summed, so each replica's loss is its share of the global
        # batch's mean: its token sum over the token count of all replicas together.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        context = tf.distribute.get_replica_context()
        if replicas > 1 and context is not None:
            count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
        loss = total / ops.maximum(count, 1.0)
        aux = self.replica_losses() if replicas > 1 else self.losses
        if aux:  # auxiliary losses of inner layers (e.g. MoE balancing), computed by the
            # layers on the whole global batch, so each replica adds its 1/N share.
            loss = loss + ops.cast(ops.sum(ops.stack(aux)), "float32") / replicas
        return loss

    def replica_losses(self):
        """`self.losses` of this replica only. Under `MirroredStrategy` the replicas trace
        their steps in parallel threads into one graph, and Keras 3 keeps `add_loss` losses in
        one list per layer, so each replica's list also holds the other replicas' losses; those
        carry the other replicas' devices."""
        if not tf.inside_function():
            return self.losses
        device = tf.zeros(()).device
        return [loss for loss in self.losses if getattr(loss, "device", device) == device]

    def make_optimizer(self):
        """The preset's own optimiser (the paper's recipe when the preset names none)."""
        from zoo import optimizers

        return optimizers.from_config(self.optimizer_config)

    def predict_step(self, data):
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        return self.head.log_prob(self(x, training=False))

    # ---- inference -----------------------------------------------------------------
    def check_ids(self, token_ids):
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

    def log_probs(self, token_ids):
        """`[batch, time, vocabulary]` log-probabilities of the token after each position."""
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

    def target_log_probs(self, inputs, targets):
        """`[batch, time]` log-probabilities of `targets` given `inputs` (both `[batch, time]`
        ids; target t is the token after input t), in one compiled call for the whole batch."""
        inputs, targets = self.check_ids(inputs), self.check_ids(targets)
        if inputs.ndim != 2 or inputs.shape != targets.shape:
            raise ValueError(f"inputs and targets must both be [batch, time] with the same shape, got "
                             f"{inputs.shape} and {targets.shape}.")
        return self._target_log_prob_fn(tf.constant(inputs), tf.constant(targets)).numpy()

    @tf.function(reduce_retracing=True)
    def _target_log_prob_fn(self, ids, targets):
        return self.head.target_log_prob(self(ids, training=False), targets)

    def score(self, texts_or_ids):
        """Log-probability of each actual next word (or token).

        Texts (a string or a list of strings) are wrapped in `<s> … </s>` with the model's
        tokenizer, and the result is one array per text of the log-probabilities of
        `w1 … wn </s>`, one per whitespace-separated word of the text (after the tokenizer's
        normalisation) and one for `</s>`: with a subword tokenizer a word's log-probability is
        the sum over its pieces; with a word or character vocabulary each token is scored as it
        is. Ids (a list of id lists, or a `[batch, time]` array) give, per row, the
        log-probabilities of tokens 1 … n-1 given what precedes them.
        """
        if isinstance(texts_or_ids, str):
            texts_or_ids = [texts_or_ids]
        items = list(texts_or_ids)
        tokenizer = None
        if items and isinstance(items[0], str):
            tokenizer = self.require_vocabulary()
            sequences = [tokenizer.encode(t) for t in items]
        else:
            sequences = [list(self.check_ids(s).reshape(-1)) for s in items]
        out = []
        for seq in sequences:
            if len(seq) < 2:
                raise ValueError("A sequence to score needs at least two tokens (a context and a target).")
            ids = tf.constant([seq[:-1]], tf.int32)
            targets = tf.constant([seq[1:]], tf.int32)
            log_probs = self._target_log_prob_fn(ids, targets).numpy()[0]
            if getattr(tokenizer, "kind", None) == "subword":
                words = np.asarray(tokenizer.word_index(seq)[1:])  # the word of each target
                log_probs = np.bincount(words, weights=log_probs, minlength=words.max() + 1).astype("float32")
            out.append(log_probs)
        return out

    def perplexity(self, data, mode="stream", batch_size=32, seq_len=128, split=None, per="token"):
        """Perplexity `exp(total NLL / N)`, as the papers compute it (§4.1).

        `data` is a list of lines (scored with the model's vocabulary under `mode`:
        "sentence" scores each line alone, "stream" the concatenation with
        `self.stream_context` tokens of left context for every window), a corpus name or
        path for `zoo.data.read_lines` (with `split`), or a `tf.data.Dataset` of
        `(inputs, targets, sample_weight)` batches.

        `per="token"`: N is the number of scored tokens (the papers' figure for a word model).
        `per="word"`: N is the number of whitespace-separated words plus one `</s>` per line
        (`zoo.data.corpus.scored_words`), whatever the tokenizer, so that word, character and
        subword models are comparable; for a word vocabulary the two are equal. It needs lines.
        """
        if mode not in ("sentence", "stream"):
            raise ValueError(f"Unknown mode {mode!r}; expected 'sentence' or 'stream'.")
        if per not in ("token", "word"):
            raise ValueError(f"Unknown per={per!r}; expected 'token' or 'word'.")
        if per == "word" and isinstance(data, tf.data.Dataset):
            raise ValueError("per='word' needs the lines (a list of strings or a corpus name), not a "
                             "tf.data.Dataset: words are counted on the text.")
        if isinstance(data, str):
            from zoo.data.corpus import read_lines

            data = read_lines(data, split or "valid")
        if isinstance(data, tf.data.Dataset):
            dataset = data
        else:
            lines = list(data)
            if not lines:
                raise ValueError("Nothing to evaluate: the list of lines is empty.")
            vocab = self.require_vocabulary()
            if mode == "stream":
                dataset = pipeline.stream_dataset(lines, vocab, batch_size, seq_len, context=self.stream_context)
            else:
                dataset = pipeline.sentence_dataset(lines, vocab, batch_size)
        total, count = 0.0, 0.0
        for x, y, w in dataset:
            lp = self._target_log_prob_fn(x, y)
            w = tf.cast(w, tf.float32)
            total -= float(tf.reduce_sum(tf.cast(lp, tf.float32) * w))
            count += float(tf.reduce_sum(w))
        if count == 0:
            raise ValueError("Nothing to evaluate: no token has a non-zero weight.")
        if per == "word":
            from zoo.data.corpus import scored_words

            count = scored_words(lines)
        return math.exp(total / count)

    def decode_step(self, token_ids, state=None):
        """One token per sequence: `token_ids` [batch] → `(log_probs [batch, vocab], state)`.

        `state=None` starts from the beginning of the sequences. Feeding a sequence token by
        token gives what `log_probs` gives for the whole sequence.
        """
        ids = self.check_ids(token_ids).reshape(-1)
        if state is None:
            state = self.initial_state(len(ids))
        return self._decode_fn(tf.constant(ids), state)

    @tf.function(reduce_retracing=True)
    def _decode_fn(self, ids, state):
        hidden, state = self.step(ids, state)
        return self.head.log_prob(hidden), state

    def generate(self, prompt, max_length=20, temperature=1.0, top_k=None, seed=None):
        """Continue `prompt` (a string, or a list of ids) up to `max_length` new tokens.

        `temperature=0` is greedy decoding; `top_k` samples among the k most likely tokens.
        Stops early at `</s>`. Returns a string for a string prompt, else a list of ids.
        """
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}.")
        if top_k is not None and not 1 <= top_k <= self.vocabulary_size:
            raise ValueError(f"top_k must be in [1, {self.vocabulary_size}], got {top_k}.")
        as_text = isinstance(prompt, str)
        if as_text:
            ids = self.require_vocabulary().encode(prompt, add_eos=False)
        else:
            ids = [int(i) for i in self.check_ids(prompt).reshape(-1)]
        rng = np.random.default_rng(seed)
        state = None
        for token in ids:
            log_probs, state = self.decode_step([token], state)
        out = []
        eos = self.vocabulary.eos_id if self.vocabulary is not None else None
        for _ in range(max_length):
            lp = log_probs.numpy()[0].astype("float64")
            lp[:2] = -np.inf  # never emit <pad> or <s>
            if temperature == 0:
                token = int(np.argmax(lp))
            else:
                lp = lp / temperature
                if top_k is not None:
                    cut = np.partition(lp, -top_k)[-top_k]
                    lp[lp < cut] = -np.inf
                p = np.exp(lp - lp.max())
                token = int(rng.choice(len(p), p=p / p.sum()))
            out.append(token)
            if token == eos:
                break
            log_probs, state = self.decode_step([token], state)
        if as_text:
            return self.vocabulary.decode(ids + out)
        return ids + out

    def require_vocabulary(self):
        if self.vocabulary is None:
            raise ValueError("This model has no vocabulary: give token ids, or load a preset directory with one.")
        return self.vocabulary

    # ---- presets -------------------------------------------------------------------
    def save_to_preset(self, directory):
        """Write `config.json`, `model.weights.h5` and `vocabulary.txt` (if any) to `directory`.

        Files are written into a temporary sibling directory and moved into place, so a
        failure never leaves a half-written preset over an existing one.
        """
        import shutil
        import tempfile

        directory = os.path.abspath(directory)
        parent = os.path.dirname(directory)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-preset-", dir=parent)
        try:
            config = {"class_name": type(self).__name__, "config": self.get_config()}
            with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
                json.dump(config, f, indent=2)
            self.save_weights(os.path.join(tmp, WEIGHTS_FILE))
            if self.vocabulary is not None:
                self.vocabulary.save(tmp)
            if os.path.isdir(directory):
                old = directory + ".old"
                shutil.rmtree(old, ignore_errors=True)
                os.rename(directory, old)
                os.rename(tmp, directory)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return directory

    def get_config(self):
        return {"vocabulary_size": self.vocabulary_size, "optimizer": self.optimizer_config,
                "name": self.name}


def load_vocabulary_if_any(directory):
    """The tokenizer saved in a preset directory (any kind: `zoo.data.tokenizers.load_tokenizer`),
    or None when it has none; a tokenizer file that is missing its partner or corrupt raises one
    sentence naming the file."""
    from zoo.data.tokenizers import CONFIG_FILE as TOKENIZER_FILE, load_tokenizer
    from zoo.data.vocab import FILENAME

    if any(os.path.exists(os.path.join(directory, name)) for name in (TOKENIZER_FILE, FILENAME)):
        return load_tokenizer(directory)
    return None


__all__ = ["LanguageModel", "Vocabulary"]
