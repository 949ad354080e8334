"""The shims of `zoo.compat` against the Keras installed: each fails loudly, naming the Keras
version, if the internal it relies on is gone or no longer does what the shim assumes."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import pytest

from zoo import compat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Two logical CPU devices must be configured before TensorFlow starts, so these run in a child.
REPLICA_LOSSES_UNDER_MIRRORED = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from zoo import compat

    class AddsLoss(keras.layers.Layer):
        def call(self, x):
            # a collective before add_loss, as SparseMoE's routing has: the replicas' threads switch
            total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, x)
            self.add_loss(tf.reduce_sum(x))
            return x + 0.0 * total

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    layer = AddsLoss()

    @tf.function
    def step():
        def replica():
            context = tf.distribute.get_replica_context()
            x = tf.fill([1], tf.cast(context.replica_id_in_sync_group + 1, tf.float32))  # losses 1 and 2
            layer(x)
            context.all_reduce(tf.distribute.ReduceOp.SUM, x)  # and one after, as compute_loss has
            kept = compat.replica_losses(layer)
            return tf.stack([float(len(layer.losses)), float(len(kept)), tf.add_n(kept)])
        return strategy.run(replica)

    json.dump([v.numpy().tolist() for v in strategy.experimental_local_results(step())], sys.stdout)
    """
)

APPLY_UNDER_MIRRORED = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from zoo import compat

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    out = {}
    for shim in (False, True):
        with strategy.scope():
            w = keras.Variable(0.0)
            opt = keras.optimizers.SGD(learning_rate=1.0)
            opt.build([w])
        if shim:
            compat.disable_gradient_all_reduce(opt)

        @tf.function
        def step():
            def replica():
                r = tf.distribute.get_replica_context().replica_id_in_sync_group
                opt.apply([tf.cast(r + 1, tf.float32)], [w])  # replica 0 gives 1, replica 1 gives 2
            strategy.run(replica)

        step()
        out["shim" if shim else "keras"] = [float(v.numpy()) for v in strategy.experimental_local_results(w.value)]
    json.dump(out, sys.stdout)
    """
)


def _child(script):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.ci
def test_replica_losses_keeps_each_replica_its_own_auxiliary_loss():
    (seen_0, kept_0, value_0), (seen_1, kept_1, value_1) = _child(REPLICA_LOSSES_UNDER_MIRRORED)
    version = keras.version()
    # Keras itself shows each replica both replicas' losses: what the shim filters.
    assert seen_0 == seen_1 == 2, (
        f"Keras {version}: inside a replica's step under MirroredStrategy, layer.losses holds {seen_0:g} and "
        f"{seen_1:g} losses, not both replicas' 2; zoo.compat.replica_losses may be unnecessary or wrong.")
    assert (kept_0, value_0, kept_1, value_1) == (1, 1.0, 1, 2.0), (
        f"Keras {version}: zoo.compat.replica_losses no longer keeps exactly the replica's own loss (replica 0 "
        f"kept {kept_0:g} summing to {value_0:g}, replica 1 {kept_1:g} summing to {value_1:g}; expected one "
        "loss each, 1 and 2); update the shim.")


@pytest.mark.ci
def test_disable_gradient_all_reduce_leaves_each_replica_its_own_gradient():
    result = _child(APPLY_UNDER_MIRRORED)
    version = keras.version()
    # Keras itself sums the replicas' gradients (1 + 2) inside apply: what the loop must switch off.
    assert result["keras"] == [-3.0, -3.0], (
        f"Keras {version}: optimizer.apply under MirroredStrategy no longer sums the replicas' "
        f"gradients ({result['keras']}); zoo.compat.disable_gradient_all_reduce may be unnecessary or wrong.")
    # With the shim, each replica applies exactly the gradient it was given.
    assert result["shim"] == [-1.0, -2.0], (
        f"Keras {version}: zoo.compat.disable_gradient_all_reduce no longer stops the optimiser's "
        f"all-reduce (replicas got {result['shim']}, expected [-1.0, -2.0]); update the shim.")


def test_a_missing_internal_is_refused_with_the_keras_version():
    class Plain:  # an optimiser without the method the shim replaces
        pass

    with pytest.raises(compat.KerasInternalsChanged, match=f"Keras {keras.version()}: Plain has no method "
                       "_all_reduce_sum_gradients"):
        compat.disable_gradient_all_reduce(Plain())


def test_loss_scale_optimizer_inner_optimizer_is_covered():
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam())
    compat.disable_gradient_all_reduce(opt)
    grads_and_vars = [(1.0, "v")]
    assert opt._all_reduce_sum_gradients(grads_and_vars) is grads_and_vars
    assert opt.inner_optimizer._all_reduce_sum_gradients(grads_and_vars) is grads_and_vars


def _profiled_matmul(logdir):
    import tensorflow as tf

    square = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    x = tf.ones((64, 64))
    square(x)  # traced outside the profile
    tf.profiler.experimental.start(logdir)
    square(x).numpy()
    tf.profiler.experimental.stop()


def test_framework_op_stats_reads_the_ops_of_a_profile(tmp_path):
    import tensorflow as tf

    _profiled_matmul(str(tmp_path))
    rows = compat.framework_op_stats(str(tmp_path))
    matmuls = [r for r in rows if "MatMul" in r["type"]]  # MatMul, or a library kernel such as _MklMatMul
    assert matmuls and all(r["total_self_time"] > 0 for r in matmuls), (
        f"TensorFlow {tf.__version__}: zoo.compat.framework_op_stats no longer finds the profiled MatMul with its "
        f"self-time (rows: {[(r.get('type'), r.get('total_self_time')) for r in rows]}); update the shim.")


def test_framework_op_stats_refuses_a_missing_internal_with_the_tensorflow_version(tmp_path, monkeypatch):
    import tensorflow as tf

    _profiled_matmul(str(tmp_path))
    monkeypatch.setitem(sys.modules, "tensorflow.python.profiler.internal._pywrap_profiler_plugin", None)
    with pytest.raises(compat.TensorFlowInternalsChanged, match=f"TensorFlow {tf.__version__}: "):
        compat.framework_op_stats(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="No tf.profiler trace"):
        compat.framework_op_stats(str(tmp_path / "empty"))


def test_sublayers_reaches_layers_kept_in_attributes_lists_and_dicts_and_refuses_a_missing_internal(monkeypatch):
    class Holder(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.one = keras.layers.Dense(2)
            self.many = [keras.layers.Dense(3), keras.layers.Dense(4)]
            self.named = {"inner": keras.Sequential([keras.layers.Dense(5)])}

    holder = Holder()
    found = compat.sublayers(holder, include_self=False)
    units = sorted(layer.units for layer in found if isinstance(layer, keras.layers.Dense))
    assert units == [2, 3, 4, 5] and holder not in found and compat.sublayers(holder)[0] is holder
    monkeypatch.delattr(keras.layers.Layer, "_flatten_layers")
    with pytest.raises(compat.KerasInternalsChanged, match=r"has no method _flatten_layers"):
        compat.sublayers(holder)


def test_the_variable_shims_give_a_layer_s_own_variables_untrack_and_index_an_optimiser_s_slots():
    dense = keras.layers.Dense(3)
    dense.build((None, 2))
    dense.trainable = False  # a frozen layer's own lists keep their order and kind
    trainable, fixed = compat.own_variables(dense)
    assert [v.name for v in trainable] == ["kernel", "bias"] and fixed == []
    added = compat.untrack_variable(dense, dense.bias, lambda: dense.add_weight(name="extra", shape=(1,)))
    assert [v.name for v in dense.weights] == ["kernel", "extra"] and added.name == "extra"
    with pytest.raises(ValueError):  # the tracker is locked again after the shim
        dense.add_weight(name="late", shape=(1,))
    optimizer = keras.optimizers.Adam(use_ema=True)
    variables = [keras.Variable([0.0, 0.0], name="a"), keras.Variable([0.0, 0.0, 0.0], name="b")]
    optimizer.build(variables)
    assert [compat.optimizer_variable_index(optimizer, v) for v in variables] == [0, 1]
    built, averages = compat.optimizer_model_variables(optimizer)
    assert built == variables and [tuple(a.shape) for a in averages] == [(2,), (3,)]
    assert compat.optimizer_model_variables(keras.optimizers.Adam())[1] is None
