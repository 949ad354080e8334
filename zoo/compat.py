"""The Keras and TensorFlow internals the zoo cannot do without, and nothing else.

Every other module of the zoo uses public APIs only. Each shim here names the internal it relies
on, checks at use that the internal is still there where it can (raising, with the Keras version,
rather than silently doing nothing), and has a test in `zoo/compat_test.py` that fails loudly,
naming the Keras version, if the internal changes meaning. This module imports nothing of the zoo.
"""

import contextlib

import keras
import tensorflow as tf


def replica_losses(model):
    """`model.losses` of the calling replica only, inside a replica's step of a
    `tf.distribute` strategy (all of `model.losses` outside a traced function).

    Why: a model's loss under `MirroredStrategy` adds its layers' auxiliary losses (the MoE
    balancing losses), each replica its own. Keras offers no per-replica view of `add_loss`.

    Internal: Keras 3 keeps a layer's `add_loss` losses in one list per layer object
    (`Layer._losses`), and `MirroredStrategy` traces the replicas' steps in parallel threads into
    one graph, so inside one replica's step `model.losses` also holds the losses the other
    replicas added. Each loss tensor is placed on the device of the replica that made it, so the
    losses kept are those on the device a new tensor gets here.
    """
    if not tf.inside_function():
        return model.losses
    device = tf.zeros(()).device
    return [loss for loss in model.losses if getattr(loss, "device", device) == device]


class KerasInternalsChanged(RuntimeError):
    """A Keras internal that a shim of `zoo.compat` relies on is gone or behaves differently."""


def _identity(grads_and_vars):
    return grads_and_vars


def disable_gradient_all_reduce(optimizer):
    """Stop `optimizer.apply` from summing gradients over the replicas of a distributed step.

    Why: the zoo's training loop all-reduces the gradients itself *before* the optimiser clips
    them, so that a step on N replicas is the step one device takes (Keras 3 instead clips each
    replica's share and then sums). The optimiser's own sum must then be off, or every gradient
    would be summed twice.

    Internal: Keras 3's TensorFlow optimiser (`keras.src.backend.tensorflow.optimizer.TFOptimizer`)
    sums in its method `_all_reduce_sum_gradients(grads_and_vars)`, called from
    `_backend_update_step`; there is no public switch. The instance attribute set here replaces
    it with the identity. A `LossScaleOptimizer`'s inner optimiser is handled too.
    """
    for target in (optimizer, getattr(optimizer, "inner_optimizer", None)):
        if target is None:
            continue
        if not callable(getattr(type(target), "_all_reduce_sum_gradients", None)):
            raise KerasInternalsChanged(
                f"Keras {keras.version()}: {type(target).__name__} has no method _all_reduce_sum_gradients, "
                "which zoo.compat.disable_gradient_all_reduce replaces so that the training loop's own "
                "all-reduce is the only one; update the shim for this Keras version."
            )
        target._all_reduce_sum_gradients = _identity
    return optimizer


def sublayers(layer, include_self=True):
    """Every layer under `layer`, however deep (attributes, lists and dicts of layers included),
    each once, `layer` itself first unless `include_self=False`.

    Why: quantizing, exporting and the weight-norm folding of the zoo must reach every layer of a
    model, including those a family keeps in its own attributes; Keras 3 has no public recursive
    listing (a `Model`'s `layers` is one level deep, and a `Layer` has none).

    Internal: Keras 3's `Layer._flatten_layers(include_self, recursive)`, the walk over tracked
    layers that `Layer.weights` itself uses.
    """
    walk = getattr(layer, "_flatten_layers", None)
    if not callable(walk):
        raise KerasInternalsChanged(
            f"Keras {keras.version()}: {type(layer).__name__} has no method _flatten_layers, which "
            "zoo.compat.sublayers walks; update the shim for this Keras version.")
    return list(walk(include_self=include_self, recursive=True))


def _require(owner, attribute, shim):
    """`owner.attribute`, or KerasInternalsChanged naming the Keras version and the shim."""
    if not hasattr(owner, attribute):
        raise KerasInternalsChanged(
            f"Keras {keras.version()}: {type(owner).__name__} has no {attribute}, which zoo.compat.{shim} "
            "relies on; update the shim for this Keras version.")
    return getattr(owner, attribute)


def own_variables(layer):
    """`(trainable, non_trainable)`: the variables `layer` created itself (not its sublayers'), in
    creation order, whether or not the layer is trainable now.

    Why: a `SparseMoE` saves the variables of the router and experts it holds as one list in the
    order it always wrote (`MixturePart`); `trainable_weights` would move every variable of a
    frozen part to the other list, and both lists take in sublayers.

    Internal: Keras 3's `Layer._trainable_variables` and `Layer._non_trainable_variables`.
    """
    return (list(_require(layer, "_trainable_variables", "own_variables")),
            list(_require(layer, "_non_trainable_variables", "own_variables")))


@contextlib.contextmanager
def _unlocked(layer):
    tracker = _require(layer, "_tracker", "untrack_variable")
    tracker.unlock()
    try:
        yield
    finally:
        tracker.lock()


def untrack_variable(layer, variable, replace_with=None):
    """Drops `variable` from a built `layer`'s weights (quantizing made it unnecessary); with
    `replace_with`, a function of no argument that adds the weights taking its place (by
    `layer.add_weight`), returning what it returns. Keras 3 refuses `add_weight` on a built layer.

    Internal: Keras 3's `Layer._tracker` (`unlock()` / `lock()`) and `Layer._untrack_variable`.
    """
    untrack = _require(layer, "_untrack_variable", "untrack_variable")
    with _unlocked(layer):
        untrack(variable)
        return replace_with() if replace_with is not None else None


def optimizer_variable_index(optimizer, variable):
    """The index of `variable` among those `optimizer` was built for, the index of its slots.

    Internal: Keras 3's `BaseOptimizer._get_variable_index`, which every built-in optimiser's
    `update_step` uses to find a variable's slots (`FactorizedAdam` does as they do)."""
    return _require(optimizer, "_get_variable_index", "optimizer_variable_index")(variable)


def optimizer_model_variables(optimizer):
    """The model variables `optimizer` was built for, in its slots' order, and the moving averages
    it keeps of them (`use_ema`; None when it keeps none).

    Internal: Keras 3's `BaseOptimizer._trainable_variables` and
    `BaseOptimizer._model_variables_moving_average`."""
    return (list(_require(optimizer, "_trainable_variables", "optimizer_model_variables")),
            getattr(optimizer, "_model_variables_moving_average", None))


class TensorFlowInternalsChanged(RuntimeError):
    """A TensorFlow internal that a shim of `zoo.compat` relies on is gone or behaves differently."""


OP_STATS_COLUMNS = ("operation", "type", "total_self_time")


def framework_op_stats(logdir):
    """The op statistics of the `tf.profiler` trace written under `logdir`: one dict per op
    (keys include "operation", its name scope; "type"; "total_self_time", in microseconds).

    Why: `zoo reproduce table4` breaks a pass's op self-time down by component of the model.

    Internal: TensorFlow's public profiler API only writes traces (`tf.profiler.experimental`);
    reading one goes through the binding TensorBoard's profile plugin uses,
    `tensorflow.python.profiler.internal._pywrap_profiler_plugin.xspace_to_tools_data(files,
    "framework_op_stats", options)`, which returns (JSON of Google-charts tables, success); the
    first table holds the ops, one row of cells per op under columns with ids.
    """
    import glob
    import importlib
    import json

    import tensorflow as tf

    files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
    if not files:
        raise FileNotFoundError(f"No tf.profiler trace (*.xplane.pb) under {logdir}.")
    try:
        plugin = importlib.import_module("tensorflow.python.profiler.internal._pywrap_profiler_plugin")
        data, _ = plugin.xspace_to_tools_data(files, "framework_op_stats", {})
        table = json.loads(data)[0]
        columns = [c["id"] for c in table["cols"]]
        rows = [dict(zip(columns, [cell.get("v") for cell in row["c"]])) for row in table["rows"]]
    except (ImportError, AttributeError, TypeError, ValueError, KeyError, IndexError) as error:
        raise TensorFlowInternalsChanged(
            f"TensorFlow {tf.__version__}: _pywrap_profiler_plugin.xspace_to_tools_data no longer reads a trace's "
            f"framework_op_stats as zoo.compat.framework_op_stats expects ({type(error).__name__}: {error}); "
            "update the shim for this TensorFlow version.") from error
    missing = [c for c in OP_STATS_COLUMNS if c not in columns]
    if missing:
        raise TensorFlowInternalsChanged(
            f"TensorFlow {tf.__version__}: framework_op_stats has no column {', '.join(missing)} (it has "
            f"{', '.join(columns)}); update zoo.compat.framework_op_stats for this TensorFlow version.")
    return rows

