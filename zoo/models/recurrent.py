"""Recurrent baselines: LSTM and Elman RNN language models (the models of `004_…txt`)."""

import keras
from keras import ops

from zoo.models.base import LanguageModel

CELLS = {"lstm": keras.layers.LSTM, "rnn": keras.layers.SimpleRNN}


class RecurrentLanguageModel(LanguageModel):
    """Embedding → stacked recurrent layers (with dropout between them) → output layer.

    Args:
        vocabulary_size: number of token ids.
        embedding_dim: width of the token embedding.
        units: width of each recurrent layer, bottom first.
        cell: "lstm" or "rnn" (an Elman network with tanh).
        dropout: dropout on the embedding, between layers and before the output layer.
        stream_context: tokens of left context each window gets under the stream protocol.
        cutoffs, optimizer: as for `GCNNLanguageModel`.
    """

    def __init__(self, vocabulary_size, embedding_dim=128, units=(256,), cell="lstm", dropout=0.0,
                 stream_context=64, cutoffs=None, optimizer=None, **kwargs):
        super().__init__(vocabulary_size=vocabulary_size, optimizer=optimizer, **kwargs)
        if cell not in CELLS:
            raise ValueError(f"Unknown cell {cell!r}; expected one of {sorted(CELLS)}.")
        if not units:
            raise ValueError("A recurrent model needs at least one layer; got units=[].")
        self.embedding_dim = embedding_dim
        self.units = [int(u) for u in units]
        self.cell = cell
        self.dropout = dropout
        self._stream_context = stream_context
        self.cutoffs = cutoffs
        self.embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")
        self.rnns = [
            CELLS[cell](u, return_sequences=True, return_state=True, name=f"{cell}_{i}")
            for i, u in enumerate(self.units)
        ]
        self.dropouts = [keras.layers.Dropout(dropout) for _ in range(len(self.units) + 1)]
        self.head = self.make_head(cutoffs)
        self.build()

    def build(self, input_shape=None):
        super().build(input_shape)  # the output layer first (see LanguageModel.build)
        self.embedding.build((None, None))
        dim = self.embedding_dim
        for rnn, units in zip(self.rnns, self.units):
            rnn.build((None, None, dim))
            dim = units

    @property
    def hidden_dim(self):
        return self.units[-1]

    @property
    def stream_context(self):
        return self._stream_context

    def call(self, token_ids, training=None):
        x = self.dropouts[0](self.embedding(token_ids), training=training)
        for rnn, drop in zip(self.rnns, self.dropouts[1:]):
            x = rnn(x, training=training)[0]
            x = drop(x, training=training)
        return x

    def initial_state(self, batch_size):
        per_layer = 2 if self.cell == "lstm" else 1
        return [[ops.zeros((batch_size, u)) for _ in range(per_layer)] for u in self.units]

    def state_name(self, path):
        """`state_<cell>_<i>_h` (and `state_lstm_<i>_c`) of recurrent layer i."""
        if len(path) == 2:
            return f"state_{self.cell}_{path[0]}_{'hc'[path[1]]}"
        return super().state_name(path)

    def step(self, token_ids, state):
        x = self.embedding(token_ids)
        new_state = []
        for rnn, s in zip(self.rnns, state):
            x, s = rnn.cell(x, list(s))
            new_state.append(list(s))
        return x, new_state

    def get_config(self):
        config = super().get_config()
        config.update({"embedding_dim": self.embedding_dim, "units": self.units, "cell": self.cell,
                       "dropout": self.dropout, "stream_context": self._stream_context,
                       "cutoffs": self.cutoffs})
        return config
