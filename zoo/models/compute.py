"""Computation per token, counted from a model's architecture: the inference multiply-adds of
one token, as Shazeer et al. (2017) count "ops/timestep" in Table 7 when they match a mixture of
experts to its dense baseline; and what a GPU holds and sends per training step when the
experts are sharded over GPUs (§3.1) or replicated, on paper (`expert_parallel_cost`).

What is counted, layer by layer (biases, activations, normalisation and lookups are left out: they
are a few adds per output, the same on both sides of a comparison):

- a (gated) convolution: kernel_size · input width · output channels (2 × width for a GLU);
- a residual block's width-changing projection, a dense feed-forward layer: input · output;
- a sparse mixture of experts: the gate, `d · E` (`d · G` and `k_primary · d · E/G` for a
  hierarchical one; the noise of equation 4 is drawn in training only), plus the k experts a
  token is sent to, `k · (d · h + h · o)`: not the experts it is not sent to;
- the output layer: the whole distribution over the vocabulary (an adaptive softmax's head and
  every tail cluster, as generation computes them).
"""

import itertools
import math

from zoo.layers import AdaptiveSoftmax, FeedForward, SparseMoE

EXPERT_VARIABLES = ("expert_kernel_in", "expert_bias_in", "expert_kernel_out", "expert_bias_out")
FLOAT = 4  # bytes: float32 weights, gradients and exchanged activations


def _size(variable) -> int:
    return int(math.prod(variable.shape))


def moe_multiply_adds(layer: SparseMoE) -> int:
    """A token's gate and its k experts (see the module docstring)."""
    d, h, o = layer.input_dim, layer.hidden_units, layer.output_dim
    gate = d * (layer.groups or layer.num_experts)
    if layer.groups:
        gate += layer.k_primary * d * layer.experts_per_group
    experts_per_token = layer.k_primary * (layer.k_secondary or 1)
    return gate + experts_per_token * (d * h + h * o)


def head_multiply_adds(head) -> int:
    if isinstance(head, AdaptiveSoftmax):
        return _size(head.head_kernel) + sum(_size(p) + _size(k) for p, k in zip(head.tail_projections,
                                                                                 head.tail_kernels))
    if hasattr(head, "kernel"):
        return _size(head.kernel)
    return head.vocabulary_size * head.embeddings().shape[-1]  # tied to the embedding


def multiply_adds_per_token(model) -> dict:
    """`{"total": int, "parts": {name: int}}`: the inference multiply-adds of one token of a
    `GCNNLanguageModel` (the module docstring says what is counted)."""
    from zoo.models.gcnn import GCNNLanguageModel

    if not isinstance(model, GCNNLanguageModel):
        raise ValueError(f"Computation per token is counted for GCNN models; got a {type(model).__name__}.")
    parts = {}
    for name in ("input_projection_layer", "output_projection_layer"):
        layer = getattr(model, name)
        if layer is not None:
            parts[layer.name] = _size(layer.kernel)
    for i, block in enumerate(model.blocks):
        convs = block.convs + ([block.projection] if block.projection is not None else [])
        parts[block.name] = sum(_size(conv.kernel) for conv in convs)
        branch = model.branch_after(i)
        if isinstance(branch, SparseMoE):
            parts[branch.name] = moe_multiply_adds(branch)
        elif isinstance(branch, FeedForward):
            parts[branch.name] = sum(_size(dense.kernel) for dense in branch.dense)
    parts["head"] = head_multiply_adds(model.head)
    return {"total": sum(parts.values()), "parts": parts}


# ---- expert parallelism on paper ------------------------------------------------------------------
def variable_bytes(variable) -> int:
    """Bytes of a variable, or of one replica's component of one, from its shape and dtype."""
    import tensorflow as tf

    return _size(variable) * tf.as_dtype(variable.dtype).size


def is_expert_variable(variable) -> bool:
    """Whether `variable` is one of a `SparseMoE`'s stacked expert weights (`EXPERT_VARIABLES`)."""
    return getattr(variable, "path", variable.name).rsplit("/", 1)[-1] in EXPERT_VARIABLES


def optimizer_state(optimizer, experts: list) -> tuple[list, list]:
    """The optimiser's state variables, its iteration counter and learning rate left out: `(those
    of the variables `experts`, the others)`; a state variable is named after its variable."""
    from zoo.factorized_adam import is_counter_variable

    prefixes = tuple(v.path.replace("/", "_") + "_" for v in experts)
    state = [v for v in optimizer.variables if not is_counter_variable(optimizer, v)]
    return [v for v in state if v.name.startswith(prefixes)], [v for v in state if not v.name.startswith(prefixes)]


def training_shapes(preset: str, **overrides) -> dict:
    """What training `preset` (its config changed by `overrides`) holds, from its layers and its
    optimiser built in a `tf.Graph` (nothing allocated): the parameters of the experts, the
    embedding and the rest (`experts`, `embedding`, `dense`), the bytes of the optimiser's state
    (`expert_state`, `other_state`), and of its one MoE layer `num_experts`, `groups` and the
    experts a token is sent to (`assignments_per_token`), with the model's `width`."""
    import tensorflow as tf

    from zoo import registry
    from zoo.compat import sublayers

    with tf.Graph().as_default():
        model = registry.build(preset, **overrides)
        moe = [layer for layer in sublayers(model) if isinstance(layer, SparseMoE)]
        if len(moe) != 1:
            raise ValueError(f"{preset}: training_shapes expects one MoE layer, found {len(moe)}.")
        variables, optimizer = model.trainable_variables, model.make_optimizer()
        optimizer.build(variables)
        experts = [v for v in variables if is_expert_variable(v)]
        expert_state, other_state = optimizer_state(optimizer, experts)
        params = sum(map(_size, variables))
        out = {"num_experts": moe[0].num_experts, "groups": moe[0].groups,
               "assignments_per_token": moe[0].k_primary * (moe[0].k_secondary or 1), "width": model.embedding_dim,
               "optimizer": type(optimizer).__name__, "experts": sum(map(_size, experts)),
               "embedding": sum(_size(v) for v in variables if v.path.rsplit("/", 1)[-1] == "embeddings"),
               "params": params, "expert_state": sum(map(variable_bytes, expert_state)),
               "other_state": sum(map(variable_bytes, other_state))}
    return {**out, "dense": params - out["experts"] - out["embedding"]}


def expert_parallel_cost(shapes: dict, gpus: tuple = (8, 64), gpus_per_node: int = 8, tokens_per_gpu: int = 18_750,
                         capacity_factor: float = 2.0, nvlink_GBps: float = 300.0, network_Gbps: float = 100.0,
                         gpu_memory_GB: float = 80.0) -> list[dict]:
    """Per GPU and training step, replicated and expert-parallel at each number of `gpus`, for a
    model of `training_shapes`: the bytes held (weights, gradients and optimiser state), the ring
    all-reduce of the dense gradients, the embedding's all-gather, the experts' all-to-all, and
    their time at the links' speeds, bandwidth-bound (docs/benchmarks.md#moe-parallel, part 3).
    The defaults: Appendix C.1's tokens per GPU, `zoo.layers.expert_parallel`'s capacity factor,
    8 GPUs of 80 GB per node with NVLink, 100 Gb/s per GPU between nodes."""
    nvlink, network = nvlink_GBps * 1e9, network_Gbps * 1e9 / 8
    rows = []
    for r, mode in itertools.product(gpus, ("replicated", "expert-parallel")):
        parallel = mode == "expert-parallel"
        if parallel and shapes["num_experts"] % r:
            rows.append({"gpus": r, "mode": mode,
                         "skipped": f"{shapes['num_experts']} experts do not split over {r} GPUs"})
            continue
        ring_bw = nvlink if r <= gpus_per_node else network  # a ring crossing nodes runs at the network's pace
        in_node = (min(r, gpus_per_node) - 1) / (r - 1)  # share of the bytes leaving a GPU that stay in its node
        shard = r if parallel else 1
        expert_bytes, expert_state = shapes["experts"] * FLOAT // shard, shapes["expert_state"] // shard
        other_bytes = (shapes["embedding"] + shapes["dense"]) * FLOAT
        held = 2 * (expert_bytes + other_bytes) + expert_state + shapes["other_state"]  # weights + grads + state
        reduced = (shapes["dense"] + (0 if parallel else shapes["experts"])) * FLOAT
        all_reduce = 2 * (r - 1) * reduced / r
        all_gather = (r - 1) * tokens_per_gpu * (shapes["width"] + 1) * FLOAT
        all_to_all = (tokens_per_gpu * shapes["assignments_per_token"] * shapes["width"] * FLOAT * 2 * 2
                      * capacity_factor * (r - 1) / r) if parallel else 0.0
        times = {"all_reduce_s": all_reduce / ring_bw, "embedding_all_gather_s": all_gather / ring_bw,
                 "all_to_all_s": all_to_all * in_node / nvlink + all_to_all * (1 - in_node) / network}
        rows.append({"gpus": r, "nodes": -(-r // gpus_per_node), "mode": mode,
                     "experts_per_gpu": shapes["num_experts"] // shard, "expert_weight_bytes": expert_bytes,
                     "expert_state_bytes": expert_state, "held_bytes": held, "fits": held <= gpu_memory_GB * 1e9,
                     "all_reduced_bytes": reduced, "all_reduce_bytes_per_gpu": all_reduce,
                     "embedding_all_gather_bytes_per_gpu": all_gather, "all_to_all_bytes_per_gpu": all_to_all,
                     **times, "communication_s": sum(times.values()),
                     "ring_link": "NVLink" if r <= gpus_per_node else "network"})
    return rows
