"""Computation per token, counted from a model's architecture: the inference multiply-adds of
one token, as Shazeer et al. (2017) count "ops/timestep" in Table 7 when they match a mixture of
experts to its dense baseline.

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

import math

from zoo.layers import AdaptiveSoftmax, FeedForward, SparseMoE


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
