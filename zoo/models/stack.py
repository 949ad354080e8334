"""The LSTM–MoE–LSTM language models of Shazeer et al. (2017), Appendix C, and their baselines.

Embedding → a stack of layers → output layer. Each layer of the stack is one of

- `{"type": "lstm", "units": u}`, or `{"type": "lstm", "units": u, "projection": p}` for an LSTM
  whose output is projected to p dimensions and fed back as the recurrent input (Sak et al.
  2014; the LSTM-2048-512 baseline and MoE-143M);
- `{"type": "moe", "num_experts": E, "k": k, "hidden_units": h, "groups": G, ...}`, a
  `layers.SparseMoE` (any of its arguments);
- `{"type": "ffn", "hidden_units": [h1, h2, …]}`, a dense ReLU feed-forward network (the
  MoE-1-Wide and MoE-1-Deep baselines: one "expert" always used).

As Appendix C.1 says: every layer but the output layer is followed by dropout, and the output of
the previous layer is then added to it (a residual connection, whenever the widths agree); the
output of an MoE (or of the feed-forward layer standing in for it) goes through a sigmoid before
the dropout.
"""

import keras
from keras import ops

from zoo.layers import SparseMoE
from zoo.models.base import LanguageModel

LAYER_TYPES = ("lstm", "moe", "ffn")


@keras.saving.register_keras_serializable(package="zoo")
class ProjectedLSTMCell(keras.layers.Layer):
    """An LSTM cell whose output `h·P` (width `projection`) is both its output and its recurrent
    input (the LSTMP of Sak et al. 2014). State: `[h·P, c]`."""

    def __init__(self, units, projection, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.projection = projection
        self.state_size = [projection, units]
        self.output_size = projection

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], 4 * self.units),
                                      initializer="glorot_uniform")
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(self.projection, 4 * self.units),
                                                initializer="orthogonal")
        # forget-gate bias of 1, as Keras' LSTM does (unit_forget_bias)
        bias = [0.0] * self.units + [1.0] * self.units + [0.0] * (2 * self.units)
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,),
                                    initializer=keras.initializers.Constant(bias))
        self.projection_kernel = self.add_weight(name="projection_kernel", shape=(self.units, self.projection),
                                                 initializer="glorot_uniform")

    def call(self, inputs, states, training=None):
        h, c = states
        z = ops.matmul(inputs, self.kernel) + ops.matmul(h, self.recurrent_kernel) + self.bias
        i, f, g, o = ops.split(z, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.matmul(ops.sigmoid(o) * ops.tanh(c), self.projection_kernel)
        return h, [h, c]

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "projection": self.projection})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class FeedForward(keras.layers.Layer):
    """ReLU layers of `hidden_units`, then a linear layer of `output_units`; any input rank."""

    def __init__(self, hidden_units, output_units, **kwargs):
        super().__init__(**kwargs)
        self.hidden_units = [int(h) for h in hidden_units]
        self.output_units = output_units
        self.dense = [keras.layers.Dense(h, activation="relu", name=f"dense_{i}")
                      for i, h in enumerate(self.hidden_units)]
        self.dense.append(keras.layers.Dense(output_units, name="output"))

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.dense:
            layer.build(shape)
            shape = shape[:-1] + (layer.units,)

    def call(self, x):
        for layer in self.dense:
            x = layer(x)
        return x

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": self.hidden_units, "output_units": self.output_units})
        return config


def check_stack(stack):
    if not isinstance(stack, (list, tuple)) or not stack:
        raise ValueError(f"layers must be a non-empty list of layer specs, got {stack!r}.")
    for spec in stack:
        if not isinstance(spec, dict) or spec.get("type") not in LAYER_TYPES:
            raise ValueError(
                f"Each layer is a dict with 'type' one of {list(LAYER_TYPES)}, got {spec!r}."
            )
    return [dict(spec) for spec in stack]


class StackLanguageModel(LanguageModel):
    """Embedding → `layers` (LSTM / sparse MoE / feed-forward) → output layer (Appendix C).

    Args:
        vocabulary_size: number of token ids.
        embedding_dim: width of the embedding (512 in C.1, 1024 in C.2).
        layers: the stack, bottom first; see the module docstring.
        dropout: `DropProb` of Table 7, after every layer but the output layer.
        stream_context: tokens of left context each window gets under the stream protocol.
        cutoffs, optimizer: as for `GCNNLanguageModel`.
    """

    def __init__(self, vocabulary_size, embedding_dim=512, layers=(), dropout=0.0, stream_context=64,
                 cutoffs=None, optimizer=None, **kwargs):
        super().__init__(vocabulary_size=vocabulary_size, optimizer=optimizer, **kwargs)
        self.layer_specs = check_stack(layers)
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self._stream_context = stream_context
        self.cutoffs = cutoffs
        self.embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")
        inputs = [embedding_dim] + self._widths()[:-1]
        self.stack = [self._make(spec, i, dim) for i, (spec, dim) in enumerate(zip(self.layer_specs, inputs))]
        self.dropouts = [keras.layers.Dropout(dropout) for _ in range(len(self.stack) + 1)]
        self.head = self.make_head(cutoffs)
        self.build()

    def build(self, input_shape=None):
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
        if spec["type"] == "moe":
            return SparseMoE(name=f"moe_{i}", **args)
        # MoE-1-Wide / -Deep: one always-used "expert", ReLU layers then a linear output layer
        return FeedForward(args.get("hidden_units", []), input_dim, name=f"ffn_{i}")

    def _widths(self):
        dims, dim = [], self.embedding_dim
        for spec in self.layer_specs:
            if spec["type"] == "lstm":
                dim = spec.get("projection") or spec["units"]
            elif spec["type"] == "moe":
                dim = spec.get("output_units") or dim
            dims.append(dim)
        return dims

    @property
    def hidden_dim(self):
        return self._widths()[-1]

    @property
    def stream_context(self):
        return self._stream_context

    def _apply(self, i, layer, x, training, state=None):
        """One layer of the stack: `(output, new_state)`; sequence (rank 3) or step (rank 2)."""
        spec = self.layer_specs[i]
        if spec["type"] == "lstm":
            if state is None:
                out = layer(x, training=training)
                return out[0], None
            y, new = layer.cell(x, list(state))
            return y, list(new)
        y = layer(x, training=training) if spec["type"] == "moe" else layer(x)
        return ops.sigmoid(y), state  # C.1: the MoE output goes through a sigmoid

    def call(self, token_ids, training=None):
        x = self.dropouts[0](self.embedding(token_ids), training=training)
        for i, layer in enumerate(self.stack):
            y, _ = self._apply(i, layer, x, training)
            y = self.dropouts[i + 1](y, training=training)
            x = y + x if y.shape[-1] == x.shape[-1] else y  # residual (C.1)
        return x

    def initial_state(self, batch_size):
        states = []
        for spec in self.layer_specs:
            if spec["type"] == "lstm":
                out = spec.get("projection") or spec["units"]
                states.append([ops.zeros((batch_size, out)), ops.zeros((batch_size, spec["units"]))])
            else:
                states.append([])
        return states

    def state_name(self, path):
        """`state_lstm_<i>_h` and `state_lstm_<i>_c` of the LSTM at position i of the stack."""
        if len(path) == 2:
            return f"state_lstm_{path[0]}_{'hc'[path[1]]}"
        return super().state_name(path)

    def step(self, token_ids, state):
        x = self.embedding(token_ids)
        new_state = []
        for i, (layer, s) in enumerate(zip(self.stack, state)):
            y, s = self._apply(i, layer, x, False, s if self.layer_specs[i]["type"] == "lstm" else None)
            new_state.append(s if s is not None else [])
            x = y + x if y.shape[-1] == x.shape[-1] else y
        return x, new_state

    def get_config(self):
        config = super().get_config()
        config.update({"embedding_dim": self.embedding_dim, "layers": self.layer_specs,
                       "dropout": self.dropout, "stream_context": self._stream_context,
                       "cutoffs": self.cutoffs})
        return config
