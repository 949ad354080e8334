"""The recurrent language models of the zoo, one family: the LSTM–MoE–LSTM models of Shazeer et
al. (2017), Appendix C, their baselines, and the plain LSTM and Elman RNN models of the recurrent
language model introduction (`004_…txt`).

Embedding → a stack of layers → output layer. Each layer of the stack is one of

- `{"type": "lstm", "units": u}`, or `{"type": "lstm", "units": u, "projection": p}` for an LSTM
  whose output is projected to p dimensions and fed back as the recurrent input
  (`layers.ProjectedLSTMCell`; the LSTM-2048-512 baseline and MoE-143M);
- `{"type": "rnn", "units": u}`, an Elman network (tanh), the introduction's character model;
- `{"type": "moe", "num_experts": E, "k": k, "hidden_units": h, "groups": G, ...}`, a
  `layers.SparseMoE` (any of its arguments);
- `{"type": "ffn", "hidden_units": [h1, h2, …]}`, a dense ReLU feed-forward network
  (`layers.FeedForward`; the MoE-1-Wide and MoE-1-Deep baselines: one "expert" always used).

As Appendix C.1 says: every layer but the output layer is followed by dropout (as is the
embedding), and the output of the previous layer is then added to it (a residual connection,
whenever the widths agree; `residual=False` leaves it out, as the plain recurrent models of the
introduction have none); the output of an MoE (or of the feed-forward layer standing in for it)
goes through a sigmoid before the dropout.

Preset directories written by the former `RecurrentLanguageModel` family (the LSTM and RNN models
before they joined this one) load as this family: `recurrent_config` gives their config here, and
their weights files have the same layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from zoo import registry
from zoo.layers import FeedForward, ProjectedLSTMCell, SparseMoE, int8
from zoo.layers.validation import check_int, check_rate
from zoo.models.base import LanguageModel

LAYER_TYPES = ("lstm", "rnn", "moe", "ffn")
RECURRENT = ("lstm", "rnn")  # the layer types that keep a state from one token to the next


def check_stack(stack):
    if not isinstance(stack, (list, tuple)) or not stack:
        raise ValueError(f"layers must be a non-empty list of layer specs, got {stack!r}.")
    for spec in stack:
        if not isinstance(spec, dict) or spec.get("type") not in LAYER_TYPES:
            raise ValueError(
                f"Each layer is a dict with 'type' one of {list(LAYER_TYPES)}, got {spec!r}."
            )
        if spec["type"] in RECURRENT:
            if "units" not in spec:
                raise ValueError(f"A {spec['type']} layer needs its 'units' (e.g. 256), got {spec!r}.")
            check_int(f"units of {spec!r}", spec["units"], minimum=1)
        if "projection" in spec:
            if spec["type"] != "lstm":
                raise ValueError(f"Only an LSTM layer takes a projection, got {spec!r}.")
            if spec["projection"] is not None:
                check_int(f"projection of {spec!r}", spec["projection"], minimum=1)
    return [dict(spec) for spec in stack]


class StackLanguageModel(LanguageModel):
    """Embedding → `layers` (LSTM / Elman RNN / sparse MoE / feed-forward) → output layer
    (Appendix C).

    Args:
        vocabulary_size: number of token ids.
        embedding_dim: width of the embedding (512 in C.1, 1024 in C.2).
        layers: the stack, bottom first; see the module docstring.
        dropout: `DropProb` of Table 7, after the embedding and every layer but the output layer.
        stream_context: tokens of left context each window gets under the stream protocol.
        cutoffs, optimizer: as for `GCNNLanguageModel`.
        residual: add each layer's input to its output when their widths agree (C.1).

    Example: Appendix C's LSTM–MoE–LSTM at a tiny size (4 experts, k = 2).

    >>> import numpy as np, zoo
    >>> lm = zoo.StackLanguageModel(vocabulary_size=50, embedding_dim=8, layers=[
    ...     {"type": "lstm", "units": 8}, {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 8},
    ...     {"type": "lstm", "units": 8}])
    >>> [type(layer).__name__ for layer in lm.stack]
    ['LSTM', 'SparseMoE', 'LSTM']
    >>> lm.log_probs(np.array([[1, 2, 3]])).shape
    (1, 3, 50)
    >>> [[tuple(s.shape) for s in layer] for layer in lm.initial_state(2)]  # (h, c) of each LSTM
    [[(2, 8), (2, 8)], [], [(2, 8), (2, 8)]]
    """

    def __init__(self, vocabulary_size: int, embedding_dim: int = 512, layers: Sequence[dict[str, Any]] = (),
                 dropout: float = 0.0, stream_context: int = 64, cutoffs: Sequence[int] | None = None,
                 optimizer: dict[str, Any] | None = None, residual: bool = True, **kwargs):
        super().__init__(vocabulary_size=vocabulary_size, optimizer=optimizer, **kwargs)
        self.layer_specs = check_stack(layers)
        check_int("embedding_dim", embedding_dim, minimum=1)
        check_rate("dropout", dropout)
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self._stream_context = stream_context
        self.cutoffs = cutoffs
        if not isinstance(residual, bool):
            raise ValueError(f"residual must be True or False, got {residual!r}.")
        self.residual = residual
        self.embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")
        inputs = [embedding_dim] + self._widths()[:-1]
        self.stack = [self._make(spec, i, dim) for i, (spec, dim) in enumerate(zip(self.layer_specs, inputs))]
        self.dropouts = [keras.layers.Dropout(dropout) for _ in range(len(self.stack) + 1)]
        self.head = self.make_head(cutoffs)
        self.build()

    def build(self, input_shape: tuple[int | None, ...] | None = None) -> None:
        super().build(input_shape)  # the output layer first (see LanguageModel.build)
        self.embedding.build((None, None))
        for layer, dim in zip(self.stack, [self.embedding_dim] + self._widths()[:-1]):
            layer.build((None, None, dim))

    @staticmethod
    def _make(spec, i, input_dim):
        args = {k: v for k, v in spec.items() if k != "type"}
        if spec["type"] == "lstm":
            if args.get("projection"):
                cell = ProjectedLSTMCell(args["units"], args["projection"], name=f"lstmp_cell_{i}")
                return keras.layers.RNN(cell, return_sequences=True, return_state=True, name=f"lstm_{i}")
            return keras.layers.LSTM(args["units"], return_sequences=True, return_state=True, name=f"lstm_{i}")
        if spec["type"] == "rnn":
            return keras.layers.SimpleRNN(args["units"], return_sequences=True, return_state=True, name=f"rnn_{i}")
        if spec["type"] == "moe":
            return SparseMoE(name=f"moe_{i}", **args)
        # MoE-1-Wide / -Deep: one always-used "expert", ReLU layers then a linear output layer
        return FeedForward(args.get("hidden_units", []), input_dim, name=f"ffn_{i}")

    def _widths(self):
        dims, dim = [], self.embedding_dim
        for spec in self.layer_specs:
            if spec["type"] in RECURRENT:
                dim = spec.get("projection") or spec["units"]
            elif spec["type"] == "moe":
                dim = spec.get("output_units") or dim
            dims.append(dim)
        return dims

    @property
    def hidden_dim(self) -> int:
        """The width `call` returns: the last layer's."""
        return self._widths()[-1]

    @property
    def stream_context(self) -> int:
        """Tokens of left context a stream window gets (the `stream_context` argument)."""
        return self._stream_context

    def _apply(self, i, layer, x, training, state=None, track_metrics=False):
        """One layer of the stack: `(output, new_state)`; sequence (rank 3) or step (rank 2). A
        mixture of experts updates its balance metrics only with `track_metrics`."""
        spec = self.layer_specs[i]
        if spec["type"] in RECURRENT:
            if state is None:
                out = layer(x, training=training)
                return out[0], None
            y, new = layer.cell(x, list(state))
            return y, list(new)
        y = layer(x, training=training, track_metrics=track_metrics) if spec["type"] == "moe" else layer(x)
        return ops.sigmoid(y), state  # C.1: the MoE output goes through a sigmoid

    def call(self, token_ids: tf.Tensor, training: bool | None = None, track_metrics: bool = True) -> tf.Tensor:
        """`track_metrics=False`: no mixture of experts updates its balance metrics (a served
        graph keeps no state)."""
        # an int8 model's weights dequantized once, not at each step of the recurrent layers' loops
        with int8.dequantized_once(self):
            x = self.dropouts[0](self.embedding(token_ids), training=training)
            for i, layer in enumerate(self.stack):
                y, _ = self._apply(i, layer, x, training, track_metrics=track_metrics)
                y = self.dropouts[i + 1](y, training=training)
                x = self._join(x, y)
        return x

    def _join(self, x, y):
        """A layer's output `y` with its input `x` added (C.1's residual), if the widths agree."""
        return y + x if self.residual and y.shape[-1] == x.shape[-1] else y

    def initial_state(self, batch_size: int | tf.Tensor) -> list[list[tf.Tensor]]:
        """`[h, c]` of each LSTM, `[h]` of each Elman layer, `[]` of any other layer: zeros."""
        states = []
        for spec in self.layer_specs:
            if spec["type"] == "lstm":
                out = spec.get("projection") or spec["units"]
                states.append([ops.zeros((batch_size, out)), ops.zeros((batch_size, spec["units"]))])
            elif spec["type"] == "rnn":
                states.append([ops.zeros((batch_size, spec["units"]))])
            else:
                states.append([])
        return states

    def state_name(self, path: Sequence[int]) -> str:
        """`state_lstm_<i>_h` and `state_lstm_<i>_c` of the LSTM at position i of the stack,
        `state_rnn_<i>_h` of an Elman layer."""
        if len(path) == 2:
            return f"state_{self.layer_specs[path[0]]['type']}_{path[0]}_{'hc'[path[1]]}"
        return super().state_name(path)

    def step(self, token_ids: tf.Tensor, state: list[list[tf.Tensor]]) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """`<int>[batch]` ids and the state `initial_state` or `step` gave: `(hidden [batch,
        hidden_dim], state)`, what `call` gives at this position."""
        x = self.embedding(token_ids)
        new_state = []
        for i, (layer, s) in enumerate(zip(self.stack, state)):
            y, s = self._apply(i, layer, x, False, s if self.layer_specs[i]["type"] in RECURRENT else None)
            new_state.append(s if s is not None else [])
            x = self._join(x, y)
        return x, new_state

    def prefill(self, token_ids: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """The prompt through each recurrent layer once (masked past each row's length, so a
        row's final state is the state at its last token); position-wise layers over every
        position at once."""
        mask = tf.sequence_mask(lengths, tf.shape(token_ids)[1])
        states = []
        with int8.dequantized_once(self):
            x = self.embedding(token_ids)
            for i, layer in enumerate(self.stack):
                if self.layer_specs[i]["type"] in RECURRENT:
                    y, *state = layer(x, mask=mask, training=False)
                    states.append(list(state))
                else:
                    y, _ = self._apply(i, layer, x, False)
                    states.append([])
                x = self._join(x, y)
        return tf.gather(x, lengths - 1, batch_dims=1), states

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"embedding_dim": self.embedding_dim, "layers": self.layer_specs,
                       "dropout": self.dropout, "stream_context": self._stream_context,
                       "cutoffs": self.cutoffs, "residual": self.residual})
        return config


def recurrent_config(config):
    """The config of this family for a preset directory saved by the former `RecurrentLanguageModel`
    family (`units`, `cell`: an embedding, one recurrent layer per entry of `units` with dropout
    after the embedding and after each, no residual connection): the same layers, so the same
    weights file, state names and numbers."""
    config = dict(config)
    cell = config.pop("cell", "lstm")
    units = config.pop("units", (256,))
    config.setdefault("embedding_dim", 128)  # that family's defaults
    config["layers"] = [{"type": cell, "units": int(u)} for u in units]
    config["residual"] = False
    return config


registry.register_renamed_family("RecurrentLanguageModel", StackLanguageModel, recurrent_config)
