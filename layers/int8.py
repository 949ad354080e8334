"""int8 weights with one float32 scale per output channel, for `LanguageModel.quantize("int8")`.

A weight `w` becomes `q = round(w / s)` in int8 (clipped to ±127, symmetric, no zero point) and
`s = max |w| / 127`, taken over every axis but the output channels' (the last axis of a kernel
`[..., inputs, outputs]`). The layer then reads `q · s` (`read`), in float32, and computes as
before: the products themselves stay float32, because on CPUs without int8 dot-product
instructions every int8 matrix product TensorFlow ships is slower than its float32 one.

A layer that holds such a weight keeps, beside the int8 variable, a non-trainable `<name>_scale`
variable, and a map from the int8 variable's path to its scale (`_int8_scales`). A product
`x · (q · s)` is computed as `(x · q) · s`, the scale applied to its output channels; inside a loop
(`dequantized_once`: decoding, a recurrent layer over time) each `q` is cast to float32 once,
before the loop, not at every step.
"""

import contextlib

import numpy as np
from keras import ops

from zoo.compat import sublayers, untrack_variable

MODES = ("int8",)


def check_mode(mode):
    """The quantization mode, checked: "int8" is the only one."""
    if mode not in MODES:
        raise ValueError(f"Unknown quantization mode {mode!r}; the zoo's models quantize to 'int8' (weights in "
                         "int8 with a float32 scale per output channel).")
    return mode


def check_not_quantized(layer):
    if is_quantized(layer):
        raise ValueError(f"{layer.name} is already quantized to int8; quantize its float32 weights once.")


def _kept(axis, ndim):
    """The axes a scale keeps (one axis, or a tuple of them: `(0, -1)` for a scale per expert and
    output channel of stacked `[experts, inputs, outputs]` kernels), as non-negative indices."""
    return tuple(sorted(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))))


def _scale_shape(variable_shape, axis):
    kept = _kept(axis, len(variable_shape))
    return [int(d) if i in kept else 1 for i, d in enumerate(variable_shape)]


def quantize_array(values, axis=-1):
    """`(q <int8>, scale <float32>)` with `q * scale ≈ values`, one scale per index of `axis`
    (or per combination of indices of a tuple of axes)."""
    values = np.asarray(values, dtype=np.float32)
    others = tuple(i for i in range(values.ndim) if i not in _kept(axis, values.ndim))
    scale = np.max(np.abs(values), axis=others) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.clip(np.round(values / scale.reshape(_scale_shape(values.shape, axis))), -127, 127).astype(np.int8)
    return q, scale


def replace(layer, variable, values=None, axis=-1):
    """Untracks `variable` (a float weight of `layer`) and returns an int8 variable of the same
    name holding `values` (by default the variable's own) with its scales; the caller stores it
    where the float one was. The scale is a non-trainable variable `<name>_scale` of `layer`."""
    values = ops.convert_to_numpy(variable if values is None else values)
    q, scale = quantize_array(values, axis)
    name = variable.name
    int8_variable, scale_variable = untrack_variable(layer, variable, lambda: (
        layer.add_weight(name=name, shape=q.shape, dtype="int8", initializer="zeros", trainable=False),
        layer.add_weight(name=f"{name}_scale", shape=scale.shape, initializer="ones", trainable=False)))
    int8_variable.assign(q)
    scale_variable.assign(scale)
    scales = dict(getattr(layer, "_int8_scales", None) or {})
    scales[int8_variable.path] = (scale_variable, axis)
    object.__setattr__(layer, "_int8_scales", scales)
    return int8_variable


def untrack(layer, variable):
    """Drops a float weight that quantizing made unnecessary (weight normalisation's `g`)."""
    untrack_variable(layer, variable)


def is_quantized(layer):
    return bool(getattr(layer, "_int8_scales", None))


def read(layer, variable):
    """The float32 value `layer` computes with: `variable` itself, or `q · scale` for an int8 one."""
    entry = (getattr(layer, "_int8_scales", None) or {}).get(variable.path)
    if entry is None:
        return variable
    scale, axis = entry
    return _as_float(layer, variable) * ops.reshape(ops.convert_to_tensor(scale), _scale_shape(variable.shape, axis))


def _as_float(layer, variable):
    """`q` cast to float32: made once before a loop (`dequantized_once`), else here."""
    cache = getattr(layer, "_int8_cache", None)
    if cache is not None and variable.path in cache:
        return cache[variable.path]
    return ops.cast(variable, "float32")


def kernel_and_scale(layer, variable, dtype="float32"):
    """`(kernel, scale)` for a product `x · w` in `dtype`: `(w, None)` for a float weight (or one
    dequantized before a loop), `(q, scale)` for an int8 one, the scale then applied to the
    product's output channels (`scaled`): `x · (q · s) = (x · q) · s`, one pass fewer over the
    weight than dequantizing it first."""
    entry = (getattr(layer, "_int8_scales", None) or {}).get(variable.path)
    if entry is None:
        return ops.cast(variable, dtype), None
    scale, axis = entry
    if _kept(axis, len(variable.shape)) != (len(variable.shape) - 1,):
        return ops.cast(read(layer, variable), dtype), None
    return ops.cast(_as_float(layer, variable), dtype), ops.cast(scale, dtype)


def quantized_and_scale(layer, variable, dtype="float32"):
    """`(q, scale)` as they are stored, `q` in `dtype` (made once before a loop) and the scale
    of whatever axes it keeps, for a caller that applies it itself (the mixture of experts' scale
    per expert and output channel, to each row's product); `(variable, None)` for a float weight."""
    entry = (getattr(layer, "_int8_scales", None) or {}).get(variable.path)
    if entry is None:
        return ops.cast(variable, dtype), None
    return ops.cast(_as_float(layer, variable), dtype), ops.cast(entry[0], dtype)


def scaled(product, scale):
    """`product` with the output-channel `scale` of `kernel_and_scale` applied (if any)."""
    return product if scale is None else product * scale


def embedding_matrix(embedding):
    """The `[vocabulary, d]` matrix of a `keras.layers.Embedding`, dequantized when Keras' own
    int8 quantization holds it (rows divided by `embeddings_scale`)."""
    cache = getattr(embedding, "_int8_cache", None)
    if cache is not None and "embeddings" in cache:
        return cache["embeddings"]
    matrix = embedding.embeddings
    if getattr(embedding, "quantization_mode", None) != "int8":
        return matrix
    return ops.cast(matrix, "float32") / ops.expand_dims(ops.convert_to_tensor(embedding.embeddings_scale), -1)


@contextlib.contextmanager
def dequantized_once(model):
    """While a loop is traced (decoding, or a recurrent layer's loop over time): every int8
    weight of `model` dequantized here, once, not at each iteration. Re-entrant: an inner use
    keeps what an outer one computed."""
    # an embedding's whole matrix only where a tied output layer reads it (a lookup reads rows)
    tied = getattr(model, "tie_embeddings", False)
    layers = [layer for layer in sublayers(model, include_self=False)
              if (is_quantized(layer) or (tied and getattr(layer, "quantization_mode", None) == "int8"))
              and getattr(layer, "_int8_cache", None) is None]
    for layer in layers:
        cache = {}
        if is_quantized(layer):
            # q as float32, the scales left to the products' outputs: one pass over each weight
            variables = {v.path: v for v in layer.weights}
            cache = {path: ops.cast(variables[path], "float32") for path in layer._int8_scales}
        else:
            cache["embeddings"] = embedding_matrix(layer)
        object.__setattr__(layer, "_int8_cache", cache)
    try:
        yield
    finally:
        for layer in layers:
            object.__setattr__(layer, "_int8_cache", None)
