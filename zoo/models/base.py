"""`LanguageModel`, the base of every model family: the contract a family fulfils, its output
layer, and training (compile, the loss, the optimiser).

A model family is a subclass of `LanguageModel`. Defining one registers it (`zoo.registry`), so
that preset directories naming it load, and checks that it provides the contract below; a family
missing a piece is refused when its class is defined, naming the piece. A subclass of a family
inherits the family's pieces: `class MyGCNN(GCNNLanguageModel)` overriding `call` alone is a
family of its own, registered under its own name (decoding, which runs `step`, follows the
change only if `step` is overridden too; defining such a class warns). One that adds weights overrides `build`
(calling the family's first) and sets what its `build` reads before calling the family's
`__init__`, which ends by building (tests/family_subclass_test.py has both).

- `__init__(vocabulary_size, ..., cutoffs=None, optimizer=None, **kwargs)`: call
  `super().__init__(vocabulary_size=..., optimizer=..., **kwargs)` first, create the layers (one
  attribute per layer; the output layer as `self.head = self.make_head(cutoffs)`), and end with
  `self.build()`.
- `build(input_shape=None)`: `super().build(input_shape)` first (it builds the output layer),
  then every other weight from shapes alone, by building each sublayer (`layer.build(shape)`),
  never by running a forward pass. Parameter counts come from this (`zoo.registry.count_params`
  builds inside a `tf.Graph`, where nothing is allocated).
- `call(token_ids, training=None)` → hidden states `[batch, time, hidden_dim]`, causal in time.
  A family whose layers keep running statistics (a mixture of experts' balance metrics) may take
  `track_metrics=True` as well; `served_hidden` passes `track_metrics=False` to a family that
  takes it and nothing to one that does not.
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

What a model answers once trained lives beside this module, mixed into `LanguageModel`:
`zoo.models.inference` (`log_probs`, `score`, `perplexity`, `decode_step`) and
`zoo.models.generation` (`generate`); `save_to_preset` writes `zoo.preset_directory`'s format.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import numbers
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo import compat, optimizers, preset_directory, registry
from zoo import metrics as zoo_metrics
from zoo.deprecation import warn
from zoo.layers import AdaptiveSoftmax, FullSoftmax, GatedConv1D, ProjectedLSTMCell, SparseMoE, int8
from zoo.models.generation import Generation
from zoo.models.inference import Inference

# Keras' `export` formats the zoo writes (`LanguageModel.export`): their names, and the function
# behind each, `(model, filepath, **kwargs) -> the path written`, which the export layer's package
# (EXPORTERS) registers when it is imported
EXPORT_FORMAT_NAMES = ("tf_saved_model", "litert")
EXPORT_FORMATS: dict[str, Callable[..., str]] = {}
EXPORTERS = "zoo.export"
LOGGER = logging.getLogger(__name__)


def register_export_format(name: str, function: Callable[..., str]) -> None:
    """Makes `LanguageModel.export(path, format=name, **kwargs)` call `function(model, path,
    **kwargs)`; `zoo.export` registers "tf_saved_model" and "litert" this way."""
    if name not in EXPORT_FORMAT_NAMES:
        raise ValueError(f"LanguageModel.export knows the formats {EXPORT_FORMAT_NAMES}, not {name!r}.")
    EXPORT_FORMATS[name] = function


# What a family must provide (see the module docstring): defined by the family or inherited from
# another family, not `LanguageModel`'s (or Keras') own.
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
            # a quantized model's config (a quantized preset): its int8 weights exist from the
            # start, so that the weights file loads into them
            pending = self.__dict__.pop("_pending_quantization", None)
            if pending is not None:
                self.built = True  # Keras marks it only once this returns
                self.quantize(pending)

    build_once.builds_once = True
    return build_once


@functools.cache
def _takes_track_metrics(cls):
    parameters = inspect.signature(cls.call).parameters
    return "track_metrics" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


class LanguageModel(Inference, Generation, keras.Model):
    """The base of every model family (`zoo.GCNNLanguageModel`, `zoo.StackLanguageModel`): a Keras
    model from token ids to hidden states, with its output layer (`head`), its training
    (`compile`, `fit`, the loss) and what it answers once trained (`log_probs`, `score`,
    `perplexity`, `decode_step`, `generate`). The module docstring gives the contract a family
    fulfils; docs/adding-a-family.md walks through one.

    Args:
        vocabulary_size: the number of token ids.
        optimizer: the preset's own optimiser spec (`zoo.optimizers`), None for the GCNN
            paper's recipe.
        quantization: "int8" for a model whose weights are int8 from the start (the config of
            a quantized preset); None for float32.
        tail_widths: the widths of an adaptive softmax's tail clusters where they are not the
            factor's (a model whose tokenizer was extended: `zoo.models.extend`).
        **kwargs: `keras.Model`'s (`name=`).

    Example: whatever the family, `call` gives hidden states, `log_probs` the distributions,
    and `step` from `initial_state`, one token at a time, what `call` gives.

    >>> import numpy as np, zoo
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    >>> isinstance(lm, zoo.LanguageModel), lm.hidden_dim, lm.stream_context
    (True, 8, 2)
    >>> ids = np.array([[1, 2, 3, 4]])
    >>> tuple(lm(ids).shape), lm.log_probs(ids).shape
    ((1, 4, 8), (1, 4, 50))
    >>> state = lm.initial_state(1)
    >>> for t in range(4):
    ...     hidden, state = lm.step(ids[:, t], state)
    >>> bool(np.allclose(hidden, lm(ids)[:, -1], atol=1e-5))
    True
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = [name for name in CONTRACT if _provider(cls, name) in LanguageModel.__mro__]
        if missing:
            raise TypeError(
                f"The model family {cls.__name__} does not define {', '.join(missing)}: a LanguageModel "
                "subclass must define each of " + ", ".join(CONTRACT) + " (see zoo/models/base.py)."
            )
        if "call" in cls.__dict__ and "step" not in cls.__dict__:
            warnings.warn(
                f"{cls.__name__} overrides call but not step: decode_step, generate and the exported "
                f"decode_step signature decode with {_provider(cls, 'step').__name__}.step, which does not "
                "see the change; override step (and initial_state) too for decoding to follow call.",
                stacklevel=2)
        # A family's build runs once: building a built model again would add every weight twice.
        # An inherited build is already wrapped; a build calling its family's runs inside one call.
        build = cls.__dict__.get("build")
        if build is not None and not getattr(build, "builds_once", False):
            cls.build = _build_once(build)
        registry.register_family(cls)
        # Keras' registry too, so that `keras.saving.load_model` reads .keras files of the family.
        name = f"zoo>{cls.__name__}"
        if keras.saving.get_registered_object(name) is None:
            keras.saving.register_keras_serializable(package="zoo")(cls)

    def __init__(self, vocabulary_size: int, optimizer: dict[str, Any] | None = None, quantization: str | None = None,
                 tail_widths: Sequence[int] | None = None, **kwargs):
        super().__init__(**kwargs)
        # an adaptive softmax's tail widths when not the factor's (a tokenizer extended: zoo.models.extend)
        self.tail_widths = None if tail_widths is None else list(tail_widths)
        self.quantization = None  # "int8" once `quantize` has run
        # Keras wraps each layer's `quantize` to check Keras' own modes first; the zoo's names the
        # modes it supports, so the model's own method is the one called.
        self.__dict__.pop("quantize", None)
        if quantization is not None:
            object.__setattr__(self, "_pending_quantization", int8.check_mode(quantization))
        if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, numbers.Integral) \
                or vocabulary_size < 1:
            raise ValueError(f"vocabulary_size must be an integer >= 1, got {vocabulary_size!r}.")
        self.vocabulary_size = int(vocabulary_size)
        self.optimizer_config = optimizer
        self.tokenizer = None  # a `zoo.data.tokenizers` tokenizer, set by `zoo.load`
        self.perplexity_tracker = zoo_metrics.PerplexityMetric(name="perplexity")

    # `vocabulary`, the former name of `tokenizer`, reads and sets it with a warning. It is not a
    # property: Keras' saving reads every attribute `dir(model)` lists, and would warn each time.
    def __getattr__(self, name):
        if name == "vocabulary":
            warn("model.vocabulary", "model.tokenizer")
            return self.tokenizer
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name == "vocabulary":
            warn("model.vocabulary", "model.tokenizer")
            name = "tokenizer"
        super().__setattr__(name, value)

    def make_head(self, cutoffs: Sequence[int] | None = None, factor: float = 4) -> FullSoftmax | AdaptiveSoftmax:
        """The output layer: a full softmax, or an adaptive softmax when `cutoffs` are given."""
        if cutoffs:
            return AdaptiveSoftmax(self.vocabulary_size, list(cutoffs), factor=factor, tail_widths=self.tail_widths,
                                   name="head")
        if self.tail_widths is not None:
            raise ValueError("tail_widths are the widths of an adaptive softmax's tail clusters; give cutoffs too.")
        return FullSoftmax(self.vocabulary_size, name="head")

    def build(self, input_shape: tuple[int | None, ...] | None = None) -> None:
        """Builds the output layer. A family's `build` calls this first, then builds its own
        layers: unseeded Keras initialisers draw their seeds when created, and this order (the
        output layer, then the layers bottom up) is the one every release of the zoo has used, so
        a model made after `keras.utils.set_random_seed(s)` starts from the same weights."""
        if not self.head.built:
            self.head.build((None, self.hidden_dim))

    def quantize(self, mode: str | None = None, **kwargs) -> None:
        """Keras 3's spelling: the model's weights as int8, each with a float32 scale per output
        channel (`zoo.layers.int8`), for a smaller export (`zoo export --quantize int8`).

        Quantized: the embedding (a scale per row, Keras' own int8 `Embedding`), every gated
        convolution (its weight-normalised kernel, `g` folded in), the LSTMP cells' kernels, the
        mixture-of-experts layers' expert kernels (a scale per expert and output channel) and
        every output layer (full, adaptive, tied). The biases, the experts' gates, dense
        feed-forward layers and Keras' plain LSTM/RNN layers stay float32. Products are computed in float32 from the
        dequantized weights; a decoding loop dequantizes each weight once, before its first token.

        A quantized model scores, generates, saves to a preset and exports; it refuses `fit`:
        its int8 weights have no gradient. Fine-tune the float32 model, then quantize it.

        Args:
            mode: "int8", the only mode.
            **kwargs: ignored (Keras' `config=` and `filters=` have no use here).

        Returns:
            None: the model is quantized in place; `model.quantization` then says "int8", and
            `save_to_preset` writes it so (`zoo.load` reads it back quantized).

        Example:

        >>> import numpy as np, zoo
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
        >>> ids = np.array([[1, 2, 3, 4]])
        >>> before = np.asarray(lm.log_probs(ids))
        >>> lm.quantize("int8")
        >>> sorted({v.dtype for v in lm.weights})
        ['float32', 'int8']
        >>> bool(np.abs(np.asarray(lm.log_probs(ids)) - before).max() < 0.05)
        True
        """
        int8.check_mode(mode)
        if self.quantization is not None:
            raise ValueError(f"This model is already quantized to {self.quantization}; quantize a float32 model "
                             "once (load it again to start from its float32 weights).")
        for layer in compat.sublayers(self, include_self=False):
            if isinstance(layer, keras.layers.Embedding):
                layer.quantize(mode)
            elif isinstance(layer, (GatedConv1D, FullSoftmax, AdaptiveSoftmax, ProjectedLSTMCell, SparseMoE)):
                layer.quantize(mode)
        self.quantization = mode
        self._forget_traces()

    def extend_tokenizer(self, lines: Iterable[str], max_new_ids: int,
                         log: Callable[[str], None] | None = None) -> LanguageModel:
        """A new model whose subword tokenizer has up to `max_new_ids` more ids, for pieces of
        `lines` (the text to fine-tune on) that it lacks, each new row started from the pieces it
        replaces (`zoo.models.extend`): before training, text without the new pieces scores as
        it did to within 5e-4 nats a token, and the old ids keep their ids and rows. This model
        is not changed. `log` receives a line of progress.

        Args:
            lines: the training text (an iterable of lines).
            max_new_ids: the most ids to add (the pieces that save the most pieces on `lines`).
            log: a function given progress lines (default: none).

        Returns:
            The extended model (this one, unchanged, when `lines` yield no new piece).

        Example:

        >>> import zoo
        >>> tokenizer = zoo.data.SubwordTokenizer.train([f"the cat {i} sat on the mat" for i in range(200)], 300)
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=len(tokenizer), embedding_dim=8,
        ...               blocks=[[[3, 8]]])
        >>> lm.tokenizer = tokenizer
        >>> extended = lm.extend_tokenizer(["kubectl get pods"] * 30 + [f"kubectl apply pod{i}" for i in range(50)], 4)
        >>> extended.vocabulary_size, extended.tokenizer.token_texts(range(300, len(extended.tokenizer)))
        (301, [' pod'])
        """
        from zoo.models.extend import extend_tokenizer

        return extend_tokenizer(self, lines, max_new_ids, log=log)[0]

    def _forget_traces(self):
        """Drops the compiled functions traced with the float32 weights (they captured those)."""
        self.__dict__.pop("_generation_functions", None)
        for klass in type(self).__mro__:
            for attribute in vars(klass).values():
                cache = getattr(attribute, "_descriptor_cache", None)
                if cache is not None:
                    cache.pop(self, None)

    def served_hidden(self, token_ids: tf.Tensor) -> tf.Tensor:
        """`call` as a served graph runs it: not training, and no layer's running statistics
        updated (`track_metrics=False`, for a family whose `call` takes it)."""
        if _takes_track_metrics(type(self)):
            return self(token_ids, training=False, track_metrics=False)
        return self(token_ids, training=False)

    def state_name(self, path: Sequence[int]) -> str:
        """The serving name of the decoding-state tensor at `path` in `initial_state`'s nesting."""
        return "state_" + "_".join(str(i) for i in path)

    # ---- training ------------------------------------------------------------------
    def compile(self, optimizer: keras.optimizers.Optimizer | str | None = None, loss: None = None,
                **kwargs) -> None:
        """Keras' `compile`, with the zoo's optimiser and loss by default.

        Args:
            optimizer: a Keras optimiser (or its name); None: the preset's own recipe
                (`make_optimizer`; by default the paper's §4.2–4.3: Nesterov momentum 0.99,
                learning rate 1, gradient clipping at norm 0.1).
            loss: must stay None: the loss is always the output layer's exact per-token
                negative log-likelihood (`compute_loss`); any other is refused in one sentence.
            **kwargs: the rest of `keras.Model.compile`'s arguments (`metrics=`, `jit_compile=` …).

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
        >>> lm.compile()
        >>> type(lm.optimizer).__name__
        'Adam'
        """
        if loss is not None:
            raise ValueError(
                "A language model of the zoo computes its own loss (the output layer's "
                f"negative log-likelihood); got loss={loss!r}. Leave `loss` unset."
            )
        if optimizer is None:
            optimizer = self.make_optimizer()
        super().compile(optimizer=optimizer, **kwargs)

    def fit(self, *args, **kwargs) -> keras.callbacks.History:
        """Keras' `fit`, refused in one sentence under `MultiWorkerMirroredStrategy` (broken in
        Keras 3: use `zoo train`).

        Args:
            *args: `keras.Model.fit`'s: typically a `tf.data.Dataset` of
                `(<int32>[batch, time] inputs, <int32>[batch, time] targets,
                <float32>[batch, time] sample_weight)` batches, as `zoo.data.stream_dataset`
                and `zoo.data.sentence_dataset` make.
            **kwargs: `keras.Model.fit`'s (`epochs=`, `validation_data=`, `callbacks=` …).

        Returns:
            Keras' `History`: per epoch, the mean `loss` (per-token negative log-likelihood,
            plus any balancing losses) and the `perplexity` of the tokens seen.

        Example:

        >>> import zoo
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
        >>> lm.tokenizer = zoo.data.WordTokenizer.build(["the cat sat on the mat", "a dog sat"])
        >>> data = zoo.data.stream_dataset(["the cat sat on the mat", "a dog sat"] * 8, lm.tokenizer,
        ...                                batch_size=4, seq_len=8)
        >>> lm.compile()
        >>> sorted(lm.fit(data, epochs=1, verbose=0).history)
        ['loss', 'perplexity']
        """
        if self.quantization is not None:
            raise RuntimeError(f"This model's weights are {self.quantization} (model.quantize), which have no "
                               "gradient; fine-tune the float32 model, then quantize it.")
        strategy = getattr(self, "distribute_strategy", None) or tf.distribute.get_strategy()
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and keras_fit_breaks_multi_worker():
            raise RuntimeError(
                f"model.fit does not work under MultiWorkerMirroredStrategy in Keras {keras.version()} "
                "(keras-team/keras#20585); train with `zoo train --strategy multi_worker_mirrored` "
                "(zoo.training.train) instead."
            )
        return super().fit(*args, **kwargs)

    def compute_loss(self, x: tf.Tensor | None = None, y: tf.Tensor | None = None, y_pred: tf.Tensor | None = None,
                     sample_weight: tf.Tensor | None = None, training: bool = True) -> tf.Tensor:
        """The mean negative log-likelihood of the real tokens of the global batch (the output
        layer's, from the hidden states `y_pred` and the targets `y`), plus the inner layers'
        auxiliary losses (a mixture of experts' balance losses)."""
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
        aux = compat.replica_losses(self) if replicas > 1 else self.losses
        if aux:  # auxiliary losses of inner layers (e.g. MoE balancing), computed by the
            # layers on the whole global batch, so each replica adds its 1/N share.
            loss = loss + ops.cast(ops.sum(ops.stack(aux)), "float32") / replicas
        return loss

    def make_optimizer(self) -> keras.optimizers.Optimizer:
        """The preset's own optimiser (the paper's recipe when the preset names none)."""
        return optimizers.from_config(self.optimizer_config)

    def predict_step(self, data: tf.Tensor | tuple[tf.Tensor, ...]) -> tf.Tensor:
        """`predict` gives the log-distributions `<float32>[batch, time, vocabulary_size]`."""
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        return self.head.log_prob(self(x, training=False))

    # ---- presets -------------------------------------------------------------------
    def save_to_preset(self, directory: str | os.PathLike) -> str:
        """Writes the model as a preset directory (`zoo.preset_directory`), which `zoo.load`
        reads back. A failure never leaves a half-written preset over an existing one.

        Args:
            directory: where to write `config.json`, `model.weights.h5` and the tokenizer's
                files (if the model has a tokenizer): a new or empty directory, or an earlier
                preset directory, whose preset files are replaced (other files in it stay). A
                directory of other files, or a file, is refused and left as it is.

        Returns:
            The directory's absolute path.

        Example:

        >>> import os, tempfile, zoo
        >>> tokenizer = zoo.data.WordTokenizer.build(["the cat sat"])
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=len(tokenizer), embedding_dim=8,
        ...               blocks=[[[3, 8]]])
        >>> lm.tokenizer = tokenizer
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     directory = lm.save_to_preset(os.path.join(tmp, "my_lm"))
        ...     print(sorted(os.listdir(directory)), zoo.load(directory).tokenizer == tokenizer)
        ['config.json', 'model.weights.h5', 'vocabulary.txt'] True
        """
        families = set(registry.FAMILIES) | set(registry.RENAMED_FAMILIES)  # the classes a zoo preset names
        return preset_directory.save(self, directory, families=families)

    # ---- export ----------------------------------------------------------------------
    def export(self, filepath: str | os.PathLike, format: str = "tf_saved_model", verbose: bool | None = None,
               input_signature: Any = None, **kwargs) -> str:
        """Keras 3's spelling of the zoo's exports, with the zoo's signatures (not Keras' one
        `serve` endpoint of `call`, which gives hidden states, not log-probabilities).

        - `format="tf_saved_model"` (Keras' default): what `zoo.export.export_saved_model`
          writes, for TF Serving. `filepath` is the model's directory that TF Serving watches
          (its `--model_base_path`): the next version is written under it, `filepath/<n>/`
          (`export_saved_model(self, dirname(filepath), name=basename(filepath), **kwargs)`;
          `version=`, `max_tokens=`, `max_new_tokens=`, `sampler=`, `batch_sizes=`,
          `head_blocks=` pass through).
        - `format="litert"`: what `zoo.export.export_litert` writes: the directory `filepath`
          (new) with `model.tflite`, the tokenizer's files and `zoo_litert.json`;
          `quantize="int8"` passes through.

        The functions behind the two formats live in `zoo.export`, which registers them here
        (`register_export_format`) when it is imported; this method imports it by name.

        Other Keras formats ("onnx", "openvino", "torch") are refused in one sentence: they would
        export `call`'s hidden states without the output layer, the tokenizer or a decoding state.

        Args:
            filepath: the TF Serving model directory (`tf_saved_model`) or the new export
                directory (`litert`).
            format: "tf_saved_model" or "litert".
            verbose: True logs the path written (`zoo.models.base`'s logger, INFO); None or False
                log nothing.
            input_signature: must stay None: the zoo's signatures fix their own inputs.
            **kwargs: the chosen export function's keyword arguments.

        Returns:
            The directory written: `filepath/<version>` or `filepath`.

        Example:

        >>> import os, tempfile, zoo
        >>> tokenizer = zoo.data.WordTokenizer.build(["the cat sat"])
        >>> lm = zoo.load("gcnn-ptb", weights="random", vocabulary_size=len(tokenizer), embedding_dim=8,
        ...               blocks=[[[3, 8]]])
        >>> lm.tokenizer = tokenizer
        >>> base = tempfile.mkdtemp()
        >>> os.path.basename(lm.export(os.path.join(base, "my-lm"), format="litert"))
        'my-lm'
        >>> lm.export(os.path.join(base, "x"), format="onnx")
        Traceback (most recent call last):
        ...
        ValueError: A zoo model exports as format='tf_saved_model' ... or 'litert' ...; got 'onnx'.
        """
        if format not in EXPORT_FORMAT_NAMES:
            raise ValueError(f"A zoo model exports as format='tf_saved_model' (TF Serving's versioned SavedModel) or "
                             f"'litert' (one .tflite file), with its own signatures; got {format!r}.")
        if input_signature is not None:
            raise ValueError("A zoo model's exports have their own signatures (token ids in, log-probabilities and "
                             "the decoding state out); leave input_signature unset.")
        if format not in EXPORT_FORMATS:
            # the export layer builds on the models, never the reverse: its package registers the
            # formats (`register_export_format`) when it is loaded, as `zoo.export` loads after `import zoo`
            importlib.import_module(EXPORTERS)
        path = EXPORT_FORMATS[format](self, filepath, **kwargs)
        if verbose:
            LOGGER.info("Exported %s to %s", format, path)
        return path

    def get_config(self) -> dict[str, Any]:
        config = {"vocabulary_size": self.vocabulary_size, "optimizer": self.optimizer_config, "name": self.name}
        if self.quantization is not None:  # only then, so that float32 configs stay as they were
            config["quantization"] = self.quantization
        if self.tail_widths is not None:
            config["tail_widths"] = list(self.tail_widths)
        return config


def _provider(cls, name):
    """The class of `cls`' method resolution order that defines `name`."""
    return next((klass for klass in cls.__mro__ if name in klass.__dict__), object)


__all__ = ["LanguageModel"]
