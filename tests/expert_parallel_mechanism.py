"""Mechanism proof for expert parallelism: a per-replica (sync-on-read) Keras variable holding
E/R experts, tokens exchanged with collective all-to-all (v3, communicator) with a hand-written
gradient (the reverse all-to-all), trained with Keras Adam, checkpointed (shards gathered),
restored; compared with a one-device reference holding all experts.

    python tests/expert_parallel_mechanism.py mirrored R OUT.json
    TF_CONFIG=... python tests/expert_parallel_mechanism.py worker 2 OUT.json   # on each worker
    MECH=v2 ...   # all_to_all_v2 instead of v3 (the v3 communicator refuses user ranks across
                  # processes; v2 in one process waits for its peer until the deadline)

The short script that proved the mechanism before the layer was built (kept as the record of
what was tried; the layer and its tests are `zoo.layers.expert_parallel` and
`tests/expert_parallel_test.py`). Measured: Mirrored x2 and x4 with v3, 2 workers with v2: 5
Adam steps equal the one-device reference to 2.4e-7 (loss) and 6e-8 (weights), with a
gather/clobber/restore of the shards and slots at step 1.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

mode, R, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * R)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(R)])
else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
import keras  # noqa: E402
from tensorflow.python.ops import collective_ops  # noqa: E402

assert strategy.num_replicas_in_sync == R
E, D, N, C, STEPS = 4, 3, 8, 8, int(os.environ.get("STEPS", 5))  # experts, width, tokens per replica, capacity per (replica, expert)
L = E // R
rng = np.random.default_rng(0)
FULL = rng.normal(size=(E, D, D)).astype("float32")
DENSE = rng.normal(size=(D, D)).astype("float32")
X = rng.normal(size=(STEPS, R * N, D)).astype("float32")  # global batch per step
GROUP_KEY = 1 << 20
RANK = json.loads(os.environ["TF_CONFIG"])["task"]["index"] if mode == "worker" else None


MECH = os.environ.get("MECH", "v3")


def _a2a(t, communicator, key):
    if MECH == "v3":
        return collective_ops.all_to_all_v3(communicator, t)
    return collective_ops.all_to_all_v2(t, group_size=R, group_key=GROUP_KEY + 1, instance_key=key,
                                        communication_hint="auto", timeout=60)


def all_to_all(t, communicator, key):
    @tf.custom_gradient
    def exchange(t):
        def grad(up):
            return _a2a(up, communicator, key + 1000)
        return _a2a(t, communicator, key), grad
    return exchange(t)


def expert_parallel_forward(x, shard, dense, communicator, replica):
    """x [N, D] local tokens; token t goes to expert (global index of t) % E."""
    h = tf.matmul(x, dense)
    gid = replica * N + tf.range(N)
    expert = gid % E
    dest = expert // L
    local = expert % L
    # send buffer [R, L, C, D]: slot = rank among tokens with the same expert
    onehot = tf.one_hot(expert, E, dtype=tf.int32)
    slot = tf.reduce_sum((tf.cumsum(onehot, axis=0) - onehot) * onehot, axis=1)
    index = tf.stack([dest, local, slot], axis=1)
    send = tf.scatter_nd(index, h, [R, L, C, D])
    recv = all_to_all(tf.reshape(send, [R, L * C * D]), communicator, 1 << 21)
    recv = tf.reshape(recv, [R, L, C, D])
    per_expert = tf.reshape(tf.transpose(recv, [1, 0, 2, 3]), [L, R * C, D])
    y = tf.nn.relu(tf.matmul(per_expert, shard))  # [L, R*C, D]
    back = tf.reshape(tf.transpose(tf.reshape(y, [L, R, C, D]), [1, 0, 2, 3]), [R, L * C * D])
    back = tf.reshape(all_to_all(back, communicator, (1 << 21) + 1), [R, L, C, D])
    return tf.gather_nd(back, index)


def reference_forward(x, full, dense, offset):
    h = tf.matmul(x, dense)
    expert = (offset + tf.range(tf.shape(x)[0])) % E
    return tf.nn.relu(tf.einsum("nd,nde->ne", h, tf.gather(full, expert)))


def loss_of(y):
    return tf.reduce_sum(tf.square(y - 0.5)) / (R * N)


# ---- reference on one device: all experts, global batch -----------------------------------
ref_full = tf.Variable(FULL)
ref_dense = tf.Variable(DENSE)
ref_opt = keras.optimizers.Adam(0.05)
ref_losses = []
for s in range(STEPS):
    with tf.GradientTape() as tape:
        loss = loss_of(reference_forward(tf.constant(X[s]), ref_full, ref_dense, 0))
    grads = tape.gradient(loss, [ref_full, ref_dense])
    ref_opt.apply([tf.convert_to_tensor(g) for g in grads], [ref_full, ref_dense])
    ref_losses.append(float(loss))

# ---- expert parallel ----------------------------------------------------------------------
with strategy.scope():
    shard = keras.Variable(np.zeros((L, D, D), "float32"), name="shard",
                           synchronization="on_read", aggregation="only_first_replica")
    dense = keras.Variable(DENSE, name="dense")
    opt = keras.optimizers.Adam(0.05)
    opt.build([shard, dense])

from zoo import compat  # noqa: E402

compat.disable_gradient_all_reduce(opt)
print("shard:", type(shard.value).__name__, "slots:", [type(v.value).__name__ for v in opt.variables])


def replica_id():
    return tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int32)


@tf.function
def init_shards():
    def fn():
        r = replica_id()
        shard.assign(tf.slice(tf.constant(FULL), [r * L, 0, 0], [L, D, D]))
    strategy.run(fn)


print("init", flush=True); init_shards(); print("init done", flush=True)

_communicators = {}


def _make_communicator():
    ctx = tf.distribute.get_replica_context()
    return collective_ops.initialize_communicator(
        group_key=GROUP_KEY, rank=RANK if RANK is not None else ctx.replica_id_in_sync_group, group_size=R, communication_hint="auto",
        timeout_seconds=60)


COMMS = tf.function(lambda: strategy.run(_make_communicator))() if MECH == 'v3' else strategy.run(lambda: tf.zeros([]))
print("communicators:", COMMS)


@tf.function
def train_step(xs, comms):
    def fn(xs, comm):
        r = replica_id()
        x = tf.slice(xs, [r * N, 0], [N, D])
        with tf.GradientTape() as tape:
            y = expert_parallel_forward(x, shard, dense, comm, r)
            loss = loss_of(y)  # this replica's share of the global loss
        g_shard, g_dense = tape.gradient(loss, [shard, dense])
        g_dense = tf.distribute.get_replica_context().all_reduce("sum", g_dense)
        opt.apply([g_shard, g_dense], [shard, dense])
        return loss
    per = strategy.run(fn, args=(xs, comms))
    return strategy.reduce("sum", per, axis=None)


def gather(variables):
    @tf.function
    def run():
        def fn():
            ctx = tf.distribute.get_replica_context()
            return [ctx.all_gather(tf.identity(v.value), axis=0) for v in variables]
        return strategy.run(fn)
    return [strategy.experimental_local_results(p)[0] for p in run()]


def scatter(variables, fulls):
    @tf.function
    def run():
        def fn():
            r = replica_id()
            for v, f in zip(variables, fulls):
                n = v.shape[0]
                v.assign(tf.slice(f, [r * n] + [0] * (len(v.shape) - 1), v.shape))
        strategy.run(fn)
    run()


losses = []
for s in range(STEPS):
    losses.append(float(train_step(tf.constant(X[s]), COMMS)))
    if s == int(os.environ.get("CKPT_AT", 1)):
        # checkpoint: shards gathered into whole tensors (plain variables), then restore
        shard_slots = [v for v in opt.variables if v.shape == shard.shape]
        fulls = gather([shard] + shard_slots)
        holders = [tf.Variable(f) for f in fulls]
        ckpt = tf.train.Checkpoint(experts=holders, dense=dense.value)
        path = ckpt.write(os.path.join(os.path.dirname(out), f"ckpt-{mode}-{os.getpid()}/c"))
        # clobber, then restore from the checkpoint
        scatter([shard] + shard_slots, [tf.zeros_like(f) for f in fulls])
        holders2 = [tf.Variable(tf.zeros_like(f)) for f in fulls]
        tf.train.Checkpoint(experts=holders2, dense=dense.value).read(path).assert_consumed()
        scatter([shard] + shard_slots, [h.read_value() for h in holders2])

final_full = gather([shard])[0].numpy()
result = {"losses": losses, "ref_losses": ref_losses,
          "max_loss_diff": float(np.max(np.abs(np.array(losses) - ref_losses))),
          "max_expert_diff": float(np.max(np.abs(final_full - ref_full.numpy()))),
          "max_dense_diff": float(np.max(np.abs(strategy.experimental_local_results(dense.value)[0].numpy()
                                                - ref_dense.numpy()))),
          "shard_shape": list(shard.shape), "replicas": R}
print(json.dumps(result))
with open(out, "w") as f:
    json.dump(result, f)
