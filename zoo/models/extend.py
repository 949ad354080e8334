"""A trained subword model with its tokenizer extended: new ids for pieces of the user's text, their
rows started from the pieces they replace (`LanguageModel.extend_tokenizer`, `zoo train
--extend-tokenizer N`).

The tokenizer side (`zoo.data.tokenizers.SubwordTokenizer.extend`) appends the new pieces after
the old ids, which keep their ids, pieces and rows. Here each new id `v` gets rows started from
`replaced[v]`, the old pieces that spelt it, so that before any training the model scores text
spelt with old pieces only as it did, to within `EPSILON` nats a token:

- embedding: the mean of the replaced pieces' rows (a tied model: the first one's row, which is
  also its output row);
- a full or tied softmax: the output column of the first replaced piece `f`, with the bias
  `b_f + log(EPSILON / K_f)`, `K_f` the number of new pieces that start with `f`. Every context
  then gives the new ids together at most `EPSILON` times the probability of their first
  pieces, so no old id's log-probability moves by more than `log(1 + EPSILON)` < EPSILON;
- an adaptive softmax: the new ids form one more tail cluster, as wide as the hidden state
  (`tail_widths`) so that its projection starts as the identity and each new id's column as the
  first replaced piece's whole output vector (the head's column, or a tail's projection times
  its column). The new cluster's prior in the head is the previous last cluster's column with
  `log(EPSILON)` added to its bias: its mass is EPSILON times that cluster's, and the other ids
  lose at most `log(1 + EPSILON)`.

A model whose adaptive softmax has no bias (converted fairseq models), a quantized model and a
word or character model are refused in one sentence.
"""

import numpy as np

from zoo.layers import AdaptiveSoftmax, FullSoftmax, TiedSoftmax

# The most probability all new ids together take from any context before training.
EPSILON = 5e-4


def check_tokenizer(tokenizer, what="This model"):
    """Refuses, in one sentence, a tokenizer that cannot be extended (none, word or character, or
    extended already)."""
    if tokenizer is None:
        raise ValueError(f"{what} has no tokenizer to extend; load it with zoo.load or set model.tokenizer.")
    tokenizer.check_extendable(what)


def check_extendable(model, what="This model"):
    """Refuses, in one sentence, a model whose tokenizer cannot be extended."""
    check_tokenizer(model.tokenizer, what)
    if model.quantization is not None:
        raise ValueError(f"{what} is quantized ({model.quantization}); extend the float32 model, then quantize it.")
    head = model.head
    if isinstance(head, AdaptiveSoftmax) and (not head.use_bias or head.fairseq_2018):
        raise ValueError(f"{what}'s adaptive softmax has no head bias (fairseq's layout), so new ids cannot start "
                         "out unlikely; its tokenizer cannot be extended.")
    if not isinstance(head, (AdaptiveSoftmax, FullSoftmax, TiedSoftmax)):
        raise ValueError(f"{what}'s output layer ({type(head).__name__}) has no rule for new ids.")


def extend_tokenizer(model, lines, max_new_ids, log=None):
    """`(model, replaced)`: a new model whose tokenizer is `model.tokenizer` extended by up to
    `max_new_ids` pieces of `lines` (`SubwordTokenizer.extend`), the new rows started from the
    pieces they replace; `model` itself is not changed. When `lines` yield no new piece, `model`
    is returned with `replaced == []`."""
    check_extendable(model)
    extended, replaced = model.tokenizer.extend(lines, max_new_ids, log=log)
    if not replaced:
        return model, []
    return with_extended_tokenizer(model, extended, replaced), replaced


def with_extended_tokenizer(model, tokenizer, replaced):
    """A new model of `model`'s family and weights, with `tokenizer` (whose last `len(replaced)`
    ids are new) and the new rows started as the module docstring says."""
    old = model.vocabulary_size
    if len(tokenizer) != old + len(replaced):
        raise ValueError(f"The extended tokenizer has {len(tokenizer):,} ids, not the model's {old:,} plus the "
                         f"{len(replaced):,} added.")
    head = model.head
    config = model.get_config()
    config["vocabulary_size"] = len(tokenizer)
    dim = model.hidden_dim
    if isinstance(head, AdaptiveSoftmax):
        config["cutoffs"] = list(head.cutoffs) + [old]
        config["tail_widths"] = [head.tail_width(dim, i) for i in range(len(head.cutoffs))] + [dim]
    new = type(model).from_config(config)
    new.tokenizer = tokenizer

    first = np.array([ids[0] for ids in replaced])
    by_path = {v.path: v for v in model.weights}
    embedding = model.embedding.embeddings.numpy()
    for variable in new.weights:
        source = by_path.get(variable.path)
        if source is not None and tuple(source.shape) == tuple(variable.shape):
            variable.assign(source)
    if isinstance(head, TiedSoftmax):
        rows = embedding[first]
    else:
        rows = np.stack([embedding[ids].mean(axis=0) for ids in replaced])
    new.embedding.embeddings.assign(np.concatenate([embedding, rows]))

    share = np.log(EPSILON) - np.log(np.bincount(first)[first])  # log(EPSILON / K_f)
    if isinstance(head, TiedSoftmax):
        bias = head.bias.numpy()
        new.head.bias.assign(np.concatenate([bias, bias[first] + share]))
    elif isinstance(head, FullSoftmax):
        kernel, bias = head.kernel.numpy(), head.bias.numpy()
        new.head.kernel.assign(np.concatenate([kernel, kernel[:, first]], axis=1))
        new.head.bias.assign(np.concatenate([bias, bias[first] + share]))
    else:
        _extend_adaptive(head, new.head, first, dim)
    return new


def output_vectors(head, ids):
    """`[dim, len(ids)]`: each id's output vector in an adaptive softmax (its logit within its
    cluster is `hidden @ vector`): the head's column, or a tail's projection times its column."""
    ids = np.asarray(ids)
    out = np.empty((head.head_kernel.shape[0], len(ids)), np.float32)
    head_kernel = head.head_kernel.numpy()
    bounds = [0] + list(head.bounds)
    for cluster in range(len(bounds) - 1):
        members = np.flatnonzero((ids >= bounds[cluster]) & (ids < bounds[cluster + 1]))
        if not len(members):
            continue
        if cluster == 0:
            out[:, members] = head_kernel[:, ids[members]]
        else:
            projection = head.tail_projections[cluster - 1].numpy()
            kernel = head.tail_kernels[cluster - 1].numpy()
            out[:, members] = projection @ kernel[:, ids[members] - bounds[cluster]]
    return out


def _extend_adaptive(head, new_head, first, dim):
    old_clusters = len(head.cutoffs)
    # the head: the old columns, then the new cluster's prior (the last cluster's, EPSILON as likely)
    kernel, bias = head.head_kernel.numpy(), head.head_bias.numpy()
    last = head.prior_start + old_clusters - 1
    new_head.head_kernel.assign(np.concatenate([kernel, kernel[:, last:last + 1]], axis=1))
    new_head.head_bias.assign(np.concatenate([bias, bias[last:last + 1] + np.log(EPSILON)]))
    # the new cluster: the identity, then each new id's first replaced piece's output vector
    new_head.tail_projections[old_clusters].assign(np.eye(dim, dtype=np.float32))
    new_head.tail_kernels[old_clusters].assign(output_vectors(head, first))
