"""A tied embedding stored once in a LiteRT int8 export.

A model whose output layer is the transpose of its input embedding (`tie_embeddings=True`) holds
one float32 table, and a float32 flatbuffer stores it once. The converter's int8 quantization
stores it twice: the output layer's `FULLY_CONNECTED` weights int8 with a scale per row (per
output channel), and the embedding's `GATHER` table int8 again with one scale for the whole table
(a gather cannot give each row its own scale). For `gcnn-ptb-deep` (10,002 × 128) the second copy
made the int8 file 37% of float32's instead of about a quarter.

`share_tied_table` rewrites such a file after conversion: each `GATHER` (and the `DEQUANTIZE` after
it) reading an int8 table equal to a `FULLY_CONNECTED`'s int8 weights, within their quantization
steps, becomes LiteRT's `EMBEDDING_LOOKUP` on the output layer's own weights, which dequantizes the
looked-up rows with their own scales (ids of more than one axis are flattened for it and the rows
reshaped back). The gather's copy is then dropped. The rows read are closer to float32 than the
gather's were (a scale per row instead of one for the table).
"""

from __future__ import annotations

import numpy as np

GATHER, DEQUANTIZE, FULLY_CONNECTED, RESHAPE, EMBEDDING_LOOKUP = 36, 6, 9, 22, 7  # LiteRT's BuiltinOperator
INT8, INT32, FLOAT32 = 9, 2, 0  # LiteRT's TensorType


def share_tied_table(flatbuffer: bytes) -> bytes:
    """`flatbuffer` with every int8 embedding table that equals an output layer's weights read
    from those weights (the module docstring); unchanged if it has none.

    Returns:
        The flatbuffer's bytes.
    """
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    codes = [max(code.builtinCode, code.deprecatedBuiltinCode) for code in model.operatorCodes]
    dropped = set()
    for subgraph in model.subgraphs:
        for weights in _output_weights(model, subgraph, codes):
            for index in reversed(range(len(subgraph.operators))):
                dropped |= _replace(model, subgraph, codes, index, weights)
    if not dropped:
        return flatbuffer
    used = {subgraph.tensors[i].buffer for subgraph in model.subgraphs for op in subgraph.operators
            for i in list(op.inputs) + list(op.outputs) if i >= 0}
    for buffer in dropped - used:  # the copy's tensor stays, unread, without its data
        model.buffers[buffer].data = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _output_weights(model, subgraph, codes):
    """The tensors of `subgraph`'s int8 `FULLY_CONNECTED` weights with a scale per row."""
    found = []
    for op in subgraph.operators:
        if codes[op.opcodeIndex] == FULLY_CONNECTED and len(op.inputs) > 1 and op.inputs[1] >= 0:
            tensor = subgraph.tensors[op.inputs[1]]
            scales = tensor.quantization.scale if tensor.quantization is not None else None
            if tensor.type == INT8 and model.buffers[tensor.buffer].data is not None and scales is not None \
                    and len(scales) == tensor.shape[0] > 1 and op.inputs[1] not in found:
                found.append(op.inputs[1])
    return found


def _values(model, tensor):
    """An int8 constant tensor's dequantized values, its scale per row broadcast."""
    q = model.buffers[tensor.buffer].data.view(np.int8).reshape(tensor.shape).astype(np.float32)
    scale = np.asarray(tensor.quantization.scale, np.float32)
    zero = np.asarray(tensor.quantization.zeroPoint if tensor.quantization.zeroPoint is not None else [0], np.float32)
    shape = [-1] + [1] * (len(tensor.shape) - 1) if scale.size > 1 else [1] * len(tensor.shape)
    return (q - zero.reshape(shape)) * scale.reshape(shape), scale.reshape(shape)


def _same_table(model, table, weights):
    """Whether the int8 tensors `table` and `weights` dequantize to one table: every value within
    half a quantization step of each."""
    if table.type != INT8 or list(table.shape) != list(weights.shape) or table.buffer == weights.buffer \
            or model.buffers[table.buffer].data is None or table.quantization is None:
        return False
    (a, step_a), (b, step_b) = _values(model, table), _values(model, weights)
    return bool(np.all(np.abs(a - b) <= (step_a + step_b) / 2 + 1e-7))


def _replace(model, subgraph, codes, index, weights):
    """The op at `index`, if a `GATHER` of a copy of `weights` followed by one `DEQUANTIZE`, made
    an `EMBEDDING_LOOKUP` of `weights`: the set of the copy's buffer, or an empty set."""
    ops, tensors = subgraph.operators, subgraph.tensors
    op = ops[index]
    if codes[op.opcodeIndex] != GATHER or not _same_table(model, tensors[op.inputs[0]], tensors[weights]):
        return set()
    users = [i for i, other in enumerate(ops) if op.outputs[0] in other.inputs]
    if len(users) != 1 or codes[ops[users[0]].opcodeIndex] != DEQUANTIZE:
        return set()
    ids, out = op.inputs[1], ops[users[0]].outputs[0]
    lookup = _code(model, codes, EMBEDDING_LOOKUP, 3)  # version 3: an int8 table
    if len(tensors[ids].shape) == 1:
        new = [_op(lookup, [ids, weights], [out])]
    else:  # EMBEDDING_LOOKUP takes one axis of ids
        reshape, width = _code(model, codes, RESHAPE, 1), int(tensors[weights].shape[1])
        flat = _tensor(model, subgraph, "zoo/tied_ids", INT32, [-1])
        rows = _tensor(model, subgraph, "zoo/tied_rows", FLOAT32, [-1, width])
        out_shape = tensors[out].shapeSignature if tensors[out].shapeSignature is not None else tensors[out].shape
        new = [_op(reshape, [ids, _constant(model, subgraph, "zoo/tied_ids_shape", [-1])], [flat]),
               _op(lookup, [flat, weights], [rows]),
               _op(reshape, [rows, _constant(model, subgraph, "zoo/tied_rows_shape", list(out_shape))], [out])]
    table = tensors[op.inputs[0]].buffer
    del ops[users[0]]
    ops[index:index + 1] = new
    return {table}


def _code(model, codes, builtin, version):
    """The index of `builtin`'s operator code, added if the model has none."""
    from tensorflow.lite.python import schema_py_generated as schema

    if builtin in codes:
        return codes.index(builtin)
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = builtin
    code.version = version
    model.operatorCodes.append(code)
    codes.append(builtin)
    return len(codes) - 1


def _op(code, inputs, outputs):
    from tensorflow.lite.python import schema_py_generated as schema

    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = code, list(inputs), list(outputs)
    return op


def _tensor(model, subgraph, name, dtype, signature, data=None):
    """A new tensor of `subgraph` with a buffer of its own (holding `data`, for a constant): its index."""
    from tensorflow.lite.python import schema_py_generated as schema

    buffer = schema.BufferT()
    buffer.data = data
    model.buffers.append(buffer)
    tensor = schema.TensorT()
    tensor.name, tensor.type, tensor.buffer = name.encode(), dtype, len(model.buffers) - 1
    tensor.shape = [max(int(d), 1) for d in signature]
    tensor.shapeSignature = [int(d) for d in signature] if any(int(d) < 0 for d in signature) else None
    subgraph.tensors.append(tensor)
    return len(subgraph.tensors) - 1


def _constant(model, subgraph, name, values):
    values = np.asarray(values, np.int32)
    return _tensor(model, subgraph, name, INT32, [values.size], values.view(np.uint8))
