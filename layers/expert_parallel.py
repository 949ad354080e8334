"""Expert parallelism for `SparseMoE` (Shazeer et al. 2017, §3.1): the dense layers stay
data-parallel, the experts are sharded across the replicas of a `tf.distribute` strategy, and each
token is sent to the replica that holds its expert and its output sent back.

The mechanism, with TensorFlow 2.20 and Keras 3 on the TensorFlow backend:

- **Per-replica variables.** An expert shard is a Keras variable created with
  `synchronization="on_read"` (a `SyncOnReadVariable`): every replica holds its own value, read and
  written locally inside `strategy.run`, never all-reduced. Replica r holds experts
  [r·E/R, (r+1)·E/R). Keras' optimisers update it per replica (`extended.update` applies each
  replica's own gradient to its own component), and place its slots with it; those slots are
  mirrored variables whose components, updated per replica, hold per-replica values too.
  `aggregation="only_first_replica"` makes a cross-replica read (a plain checkpoint, `numpy()`)
  return replica 0's shard: the whole tensor is gathered explicitly (`gather_shards`) for
  checkpoints and presets.
- **The exchange**, TensorFlow's collective all-to-all ops (public as `tf.raw_ops`).
  `MirroredStrategy` (one process): `CollectiveAllToAllV3` with a communicator made once per layer
  by `CollectiveInitializeCommunicator` (a second initialisation of a group fails, so it is made
  when the layer is built, outside the step, and its per-replica handles are captured).
  `MultiWorkerMirroredStrategy` (one device per worker): `CollectiveAllToAllV2` with a group key
  per layer and an instance key per traced op (the V3 communicator refuses user-given ranks
  across processes: "Only part of the group members have user given rank specified"; V2 in one
  process waits for its peer until the deadline). Neither op has a registered gradient; the
  gradient of an all-to-all is the reverse all-to-all, which for an exchange of row blocks is the
  same all-to-all on the upstream gradient (`ExpertExchange.exchange`).

Expert parallelism is placement, not architecture: it is not part of a layer's config, so a
model saved from an expert-parallel run (`zoo.training` writes the gathered, unsharded weights)
loads on one device as an ordinary model.
"""

import contextlib
import itertools
import threading

import tensorflow as tf

# Group keys of the expert exchanges: far above the keys tf.distribute hands out (from 1 up).
GROUP_KEY_BASE = 1 << 22
_group_keys = itertools.count(GROUP_KEY_BASE)
_settings = threading.local()
DEFAULT_CAPACITY_FACTOR = 2.0


@contextlib.contextmanager
def expert_parallelism(capacity_factor=DEFAULT_CAPACITY_FACTOR):
    """Within this block (in this thread), every `SparseMoE` constructed without an explicit
    `expert_parallel` argument is expert-parallel with this `capacity_factor`. `zoo.training`
    builds a model in this block for `TrainConfig(expert_parallel=True)`; the model's config (and
    so its saved preset) does not change."""
    check_capacity_factor(capacity_factor)
    previous = getattr(_settings, "value", None)
    _settings.value = float(capacity_factor)
    try:
        yield
    finally:
        _settings.value = previous


def scoped_capacity_factor():
    """The capacity factor of the innermost open `expert_parallelism` block, or None."""
    return getattr(_settings, "value", None)


def check_capacity_factor(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value \
            or value == float("inf"):
        raise ValueError(f"capacity_factor must be a finite number > 0, got {value!r}.")
    return float(value)


def is_expert_shard(variable):
    """Whether `variable` is one replica's shard of an expert-parallel `SparseMoE`."""
    return bool(getattr(variable, "expert_shard", False))


def replica_index():
    """This replica's index in the sync group (an int32 scalar), inside `strategy.run`."""
    context = tf.distribute.get_replica_context()
    return tf.cast(context.replica_id_in_sync_group, tf.int32)


def _multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def check_strategy(strategy, num_experts, name):
    """The number of replicas R of `strategy`, checked for expert parallelism of `num_experts`."""
    replicas = strategy.num_replicas_in_sync
    if replicas < 2:
        raise ValueError(
            f"{name}: expert parallelism needs a tf.distribute strategy with more than one replica in scope "
            f"when the layer is built (MirroredStrategy over several devices, or MultiWorkerMirroredStrategy), "
            f"got {replicas} replica.")
    if num_experts % replicas:
        raise ValueError(
            f"{name}: num_experts={num_experts} cannot be split evenly over {replicas} replicas; expert "
            f"parallelism needs a number of experts divisible by the number of replicas.")
    if _multi_worker(strategy):
        local = len(strategy.extended.worker_devices)
        if local != 1:
            raise ValueError(
                f"{name}: expert parallelism under MultiWorkerMirroredStrategy needs one device per worker, "
                f"got {local} on this worker (run one worker per device).")
    elif not isinstance(strategy, tf.distribute.MirroredStrategy):
        raise ValueError(
            f"{name}: expert parallelism works under MirroredStrategy or MultiWorkerMirroredStrategy, "
            f"got {type(strategy).__name__}.")
    return replicas


class ExpertExchange:
    """The all-to-all of one expert-parallel layer under `strategy` (R replicas): `exchange(t)`
    inside `strategy.run` sends row block r of `t` ([R, ...]) to replica r and returns the blocks
    received, block s from replica s; its gradient is the same exchange of the upstream gradient.
    Made when the layer is built (in the strategy's scope, outside any step function)."""

    def __init__(self, strategy):
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync
        self.group_key = next(_group_keys)
        self.multi_worker = _multi_worker(strategy)
        self._instance_keys = itertools.count(1)
        self._communicators = None
        if not self.multi_worker:
            def make():
                return tf.raw_ops.CollectiveInitializeCommunicator(
                    group_key=self.group_key, rank=tf.distribute.get_replica_context().replica_id_in_sync_group,
                    group_size=self.replicas, communication_hint="auto", timeout_seconds=600)

            with tf.init_scope():
                handles = tf.function(lambda: strategy.run(make), autograph=False)()
            self._communicators = list(strategy.experimental_local_results(handles))

    def _one_way(self, t):
        if self.multi_worker:
            # A new instance key for every op traced (as tf.distribute's own collectives do): an
            # instance keeps the shape it was first run with, and the train and the evaluation
            # steps exchange blocks of different shapes. Every worker traces the same functions
            # in the same order, so the keys agree.
            return tf.raw_ops.CollectiveAllToAllV2(
                input=t, group_size=self.replicas, group_key=self.group_key,
                instance_key=next(self._instance_keys), ordering_token=[], communication_hint="auto")
        replica = tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group)
        return tf.raw_ops.CollectiveAllToAllV3(input=t, communicator=self._communicators[int(replica)],
                                               group_assignment=[])

    def exchange(self, t):
        """The all-to-all of `t`, with the reverse all-to-all as its gradient."""

        @tf.custom_gradient
        def run(t):
            def grad(upstream):
                return self._one_way(upstream)
            return self._one_way(t), grad

        return run(t)


def init_shards(strategy, variables, seed):
    """Gives every replica its own slice of each expert variable: `(variable, limit)` pairs, each
    component drawn uniformly in [-limit, limit] (limit 0: zeros) from a stateless generator keyed
    by (`seed`, replica, variable), so each replica's experts differ and a rerun draws the same."""

    @tf.function(autograph=False)
    def run():
        def assign():
            r = replica_index()
            for i, (variable, limit) in enumerate(variables):
                if limit:
                    value = tf.random.stateless_uniform(variable.shape, seed=tf.stack([seed, r * 1000 + i]),
                                                        minval=-limit, maxval=limit, dtype=variable.dtype)
                else:
                    value = tf.zeros(variable.shape, variable.dtype)
                variable.assign(value)
        strategy.run(assign)

    with tf.init_scope():
        run()


_transfers = {}


def _transfer(strategy, variables):
    """The (gather, scatter) `tf.function`s of `variables` under `strategy`, made once."""
    key = (id(strategy),) + tuple(id(v) for v in variables)
    if key not in _transfers:
        @tf.function(autograph=False)
        def gather():
            def run():
                context = tf.distribute.get_replica_context()
                return [context.all_gather(tf.identity(v.value), axis=0) for v in variables]
            return strategy.run(run)

        @tf.function(autograph=False)
        def scatter(*wholes):
            def run(*wholes):
                r = replica_index()
                for variable, whole in zip(variables, wholes):
                    n = variable.shape[0]
                    variable.assign(tf.gather(whole, tf.range(r * n, (r + 1) * n)))
            strategy.run(run, args=wholes)

        _transfers[key] = (variables, gather, scatter)  # the variables kept alive with their key
    return _transfers[key][1:]


def gather_shards(strategy, variables):
    """The whole tensors of per-replica `variables` (each [E/R, ...] → [E, ...], replica order),
    as numpy arrays. A collective: every worker of a job must call it."""
    if not variables:
        return []
    gather, _ = _transfer(strategy, list(variables))
    return [strategy.experimental_local_results(t)[0].numpy() for t in gather()]


def scatter_shards(strategy, variables, wholes):
    """The inverse of `gather_shards`: replica r's component of each variable gets its slice of
    the whole tensor."""
    if not variables:
        return
    _, scatter = _transfer(strategy, list(variables))
    scatter(*[tf.convert_to_tensor(w) for w in wholes])
