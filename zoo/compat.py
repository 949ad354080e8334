"""The Keras and TensorFlow internals the zoo cannot do without, and nothing else.

Every other module of the zoo uses public APIs only. Each shim here names the internal it relies
on, checks at use that the internal is still there where it can (raising, with the Keras version,
rather than silently doing nothing), and has a test in `zoo/compat_test.py` that fails loudly,
naming the Keras version, if the internal changes meaning. This module imports nothing of the zoo.
"""

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
