"""A model's decoding state as named tensors, for the `decode_step` signature.

`LanguageModel.initial_state(batch)` is a nested list of tensors whose layout depends on the
family. TF Serving needs a flat set of named inputs and outputs with fixed shapes, so each leaf
is named by the family itself (`LanguageModel.state_name(path)`), for the zoo's families:

- `GCNNLanguageModel`: `state_block_<i>_conv_<j>`, `[batch, kernel_size - 1, input width]`, the
  last k−1 inputs of conv layer j of residual block i (fairseq's linearised-convolution buffer);
- `StackLanguageModel`: `state_lstm_<i>_h` `[batch, projection or units]` and `state_lstm_<i>_c`
  `[batch, units]` for each LSTM at position i of the stack, `state_rnn_<i>_h` `[batch, units]`
  for an Elman layer (MoE and feed-forward layers keep no state).

A leaf with a zero-sized axis (the buffer of a width-1 convolution, k − 1 = 0) is not sent: it has
no named tensor, and the graph recreates it itself. The state before the first token is all zeros
(the conv layers' left padding, the recurrent layers' zero state).
"""

import tensorflow as tf


def _leaves(state, path=()):
    if isinstance(state, (list, tuple)):
        for i, item in enumerate(state):
            yield from _leaves(item, path + (i,))
    else:
        yield path, state


class StateLayout:
    """Names, shapes and the nesting of a model's decoding state.

    `specs`: `{name: shape without the batch axis}` of the tensors a client sends and receives,
    in a fixed order; `flatten(nested)` → `{name: tensor}`; `unflatten({name: tensor}, batch)` →
    the nested list `model.step` takes.
    """

    def __init__(self, model):
        self.structure = model.initial_state(1)
        self.leaves = []  # (path, name or None, shape without batch, dtype)
        self.specs = {}
        for path, leaf in _leaves(self.structure):
            shape = tuple(int(d) for d in leaf.shape[1:])
            name = model.state_name(path) if all(shape) else None  # empty buffers are not sent
            if name is not None:
                if name in self.specs:
                    raise ValueError(f"Two decoding-state tensors would both be named {name!r}.")
                self.specs[name] = shape
            self.leaves.append((path, name, shape, tf.as_dtype(leaf.dtype)))

    def tensor_specs(self):
        return [tf.TensorSpec((None,) + self.specs[name], tf.float32, name=name) for name in self.specs]

    def flatten(self, nested):
        flat = dict(_leaves(nested))
        return {name: flat[path] for path, name, _, _ in self.leaves if name is not None}

    def unflatten(self, named, batch_size):
        values = {}
        for path, name, shape, dtype in self.leaves:
            if name is None:
                values[path] = tf.zeros(tf.concat([[batch_size], tf.constant(shape, tf.int32)], 0), dtype)
            else:
                values[path] = tf.cast(named[name], dtype)

        def build(node, path):
            if isinstance(node, (list, tuple)):
                return [build(item, path + (i,)) for i, item in enumerate(node)]
            return values[path]

        return build(self.structure, ())
