"""`sort_by` and `segment_matmul`, with its hand-written gradient, against plain TensorFlow."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.layers.segment_ops import segment_matmul, sort_by


def test_sort_by_is_stable_and_counts_every_segment():
    order, sizes = sort_by(tf.constant([2, 0, 2, 1, 0]), 4)
    assert order.numpy().tolist() == [1, 4, 3, 0, 2]  # equal ids keep their order
    assert sizes.numpy().tolist() == [2, 1, 2, 0]  # an empty last segment is counted as 0


# ---- segment_matmul's hand-written gradient ----------------------------------------------------
def segment_reference(rows, sizes, kernels):
    """Every row times its own segment's kernel through a gather, differentiated by TensorFlow."""
    ids = tf.repeat(tf.range(len(sizes)), sizes)
    return tf.einsum("na,nab->nb", rows, tf.gather(kernels, ids))


@pytest.mark.parametrize("sizes", [
    [3, 0, 5, 1],  # an empty segment
    [0, 9, 0, 0],  # every row in one segment
    [600, 0, 700, 5],  # mean segment size over SMALL_SEGMENT_ROWS: the other row-gradient branch
])
@pytest.mark.parametrize("graph", [False, True])
def test_segment_matmul_gradients_equal_the_gather_reference(sizes, graph):
    rng = np.random.default_rng(0)
    rows = tf.constant(rng.normal(size=(sum(sizes), 5)))
    kernels = tf.constant(rng.normal(size=(len(sizes), 5, 3)))
    upstream = tf.constant(rng.normal(size=(sum(sizes), 3)))

    def both(rows, sizes, kernels):
        results = []
        for fn in (segment_matmul, segment_reference):
            with tf.GradientTape() as tape:
                tape.watch([rows, kernels])
                out = fn(rows, sizes, kernels)
            grads = tape.gradient(out, [rows, kernels], output_gradients=upstream)
            results.append([out] + [tf.convert_to_tensor(g) for g in grads])
        return results

    if graph:  # the number of rows and the sizes unknown while tracing
        both = tf.function(both, input_signature=[
            tf.TensorSpec((None, 5), tf.float64), tf.TensorSpec((len(sizes),), tf.int32),
            tf.TensorSpec((len(sizes), 5, 3), tf.float64)])
    ours, reference = both(rows, tf.constant(sizes, tf.int32), kernels)
    for a, b in zip(ours, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert np.abs(ours[2].numpy()[np.array(sizes) == 0]).max(initial=0.0) == 0.0  # empty: zero gradient
