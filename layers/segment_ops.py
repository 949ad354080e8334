"""Rows sorted into contiguous segments, each segment multiplied by its own matrix: the kernel of
the sparse MoE's dispatch (`moe_dispatch`, one segment per expert) and of its hierarchical router
(`moe_router`, one segment per group of Appendix B).

Every segment multiplies only its own rows, so the work per row is one matmul whatever the number
of segments (Shazeer et al. 2017, §3.1: capacity grows, computation per token does not). What does
grow with the number of segments S is memory traffic: every step reads all S kernels and writes
their full gradients once, with fewer rows per segment to amortise each kernel over (§3.1's
"shrinking batch problem"). The kernel-gradient write is kept to that one write, and the row
gradient is arranged so that small segments do not re-pack each kernel transposed.
"""

import tensorflow as tf

# Below this many rows per segment on average, the row gradient of `segment_matmul` is computed
# as (kernel · upstreamᵀ)ᵀ rather than upstream · kernelᵀ (see `_segment_matmul_grad`). Read
# when a call is traced.
SMALL_SEGMENT_ROWS = 512


def sort_by(ids: tf.Tensor, num_segments: int) -> tuple[tf.Tensor, tf.Tensor]:
    """The stable order that sorts `ids`, and how many ids fall in each segment.

    Args:
        ids: <int32>[n], each in [0, num_segments).
        num_segments: the number of segments S.

    Returns:
        `(order, sizes)`: <int32>[n], the stable argsort of `ids`; <int32>[S], the count of each id.

    Example:

    >>> order, sizes = sort_by(tf.constant([2, 0, 2, 1]), 3)
    >>> order.numpy().tolist(), sizes.numpy().tolist()
    ([1, 3, 0, 2], [1, 1, 2])
    """
    order = tf.argsort(ids, stable=True)
    sizes = tf.math.unsorted_segment_sum(tf.ones_like(ids), ids, num_segments)
    return order, sizes


def segment_matmul(rows: tf.Tensor, sizes: tf.Tensor, kernels: tf.Tensor) -> tf.Tensor:
    """Each segment's rows times its own kernel, one matmul per segment.

    The gradient is written by hand (see `_segment_matmul_grad`); it is the same arithmetic as
    TensorFlow's own, arranged for small segments.

    Args:
        rows: <float>[n, a], sorted by segment: the first `sizes[0]` rows are segment 0's, etc.
        sizes: <int32>[S], the number of rows of each segment (summing to n).
        kernels: <float>[S, a, b], one matrix per segment (S known when tracing).

    Returns:
        <float>[n, b]: row i of segment s times `kernels[s]`.

    Example:

    >>> rows = tf.ones((3, 2))
    >>> kernels = tf.stack([tf.eye(2), 2.0 * tf.eye(2)])
    >>> segment_matmul(rows, tf.constant([1, 2]), kernels).numpy().tolist()
    [[1.0, 1.0], [2.0, 2.0], [2.0, 2.0]]
    """
    num_segments = kernels.shape[0]

    @tf.custom_gradient
    def forward(rows, kernels):
        parts = tf.split(rows, sizes, num=num_segments)
        # unstack once (dim-0 slices share the stacked buffer: no copy); slicing the stacked
        # tensor S times would give S full-size gradients.
        slices = tf.unstack(kernels, num=num_segments)
        outputs = tf.concat([tf.matmul(part, kernel) for part, kernel in zip(parts, slices)], 0)

        def grad(upstream):
            return _segment_matmul_grad(rows, parts, slices, sizes, upstream)

        return outputs, grad

    return forward(rows, tf.convert_to_tensor(kernels))


def _segment_matmul_grad(rows, parts, slices, sizes, upstream):
    """Gradients of `segment_matmul` w.r.t. rows and kernels.

    Kernel gradient: `part_sᵀ · upstream_s` per segment, stacked once into the [S, a, b]
    gradient (the one unavoidable write of all S kernels). Row gradient: `upstream_s · kernel_sᵀ`
    per segment, which is what `tf.matmul`'s gradient does; with a transposed right operand the
    CPU (Eigen) contraction re-packs the whole kernel in transposed order for every call, which
    costs as much as the multiplication itself when a segment has few rows (many experts, §3.1's
    shrinking batch). For small segments it is computed as `(kernel_s · upstream_sᵀ)ᵀ` instead,
    reading each kernel in its stored order, and for large ones as usual; the choice follows the
    mean segment size of the step (`SMALL_SEGMENT_ROWS`; the measurements are in
    docs/benchmarks.md, `zoo benchmark moe`).
    """
    num_segments = len(slices)
    ups = tf.split(upstream, sizes, num=num_segments)
    kernel_grads = tf.stack(
        [tf.matmul(part, up, transpose_a=True) for part, up in zip(parts, ups)]
    )

    def large_segments():
        return tf.concat([tf.matmul(up, kernel, transpose_b=True) for up, kernel in zip(ups, slices)], 0)

    def small_segments():
        return tf.concat(
            [tf.transpose(tf.matmul(kernel, up, transpose_b=True)) for up, kernel in zip(ups, slices)], 0
        )

    small = tf.shape(rows)[0] < SMALL_SEGMENT_ROWS * num_segments
    return tf.cond(small, small_segments, large_segments), kernel_grads
