import numpy as np
import pytest
import tensorflow as tf
import keras

from zoo.layers import AdaptiveSoftmax
from tests.layer_checks import check_gradients, check_output_layer, first_use

VOCAB, CUTOFFS, DIM = 50, [10, 20, 35], 16


def make(dtype="float32", factor=2):
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, factor=factor, dtype=dtype)
    layer.build((None, DIM))
    return layer


def data(seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(3, 7, DIM)).astype(dtype)
    # every cluster gets targets, including the first and last id of each
    targets = rng.integers(0, VOCAB, size=(3, 7))
    targets[0, :6] = [0, 9, 10, 19, 35, 49]
    return hidden, targets.astype("int32")


def test_log_prob_is_normalised_and_loss_matches_it():
    layer = make()
    hidden, targets = data()
    log_prob = layer.log_prob(hidden).numpy()
    assert log_prob.shape == (3, 7, VOCAB)
    np.testing.assert_allclose(np.exp(log_prob).sum(-1), 1.0, atol=1e-5)
    gathered = np.take_along_axis(log_prob, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(layer.loss(hidden, targets).numpy(), -gathered, atol=1e-5)
    np.testing.assert_allclose(layer.target_log_prob(hidden, targets).numpy(), gathered, atol=1e-5)


def test_log_prob_factorises_head_and_cluster():
    """p(w) = p_head(cluster) * p_cluster(w), written out by hand for one tail word."""
    layer = make()
    h = data()[0][0, :1]  # [1, DIM]
    head = h @ layer.head_kernel.numpy() + layer.head_bias.numpy()
    head = head - np.log(np.exp(head).sum(-1, keepdims=True))
    tail = h @ layer.tail_projections[1].numpy() @ layer.tail_kernels[1].numpy()
    tail = tail - np.log(np.exp(tail).sum(-1, keepdims=True))
    word = 23  # cluster 1 is [20, 35)
    expected = head[0, CUTOFFS[0] + 1] + tail[0, word - 20]
    np.testing.assert_allclose(layer.log_prob(h).numpy()[0, word], expected, atol=1e-5)


def test_loss_under_tf_function_and_graph_mode_matches_eager():
    layer = make()
    hidden, targets = data(1)
    eager = layer.loss(hidden, targets).numpy()
    graph = tf.function(layer.loss)(tf.constant(hidden), tf.constant(targets)).numpy()
    np.testing.assert_allclose(graph, eager, atol=1e-6)


def test_loss_gradients_match_finite_differences():
    layer = make(dtype="float64")
    hidden, targets = data(2, "float64")
    hidden_t = tf.Variable(hidden)
    weights = tf.constant(np.random.default_rng(3).normal(size=targets.shape))

    def objective():
        return tf.reduce_sum(layer.loss(hidden_t, targets) * weights)

    variables = [hidden_t, layer.head_kernel, layer.tail_projections[2], layer.tail_kernels[0]]
    check_gradients(objective, variables, np.random.default_rng(4), samples=4, require_nonzero=False,
                    graph=False)


def test_predict_is_the_argmax_of_the_full_distribution():
    layer = make()
    hidden = np.random.default_rng(5).normal(size=(4, 9, DIM)).astype("float32") * 3
    expected = layer.log_prob(hidden).numpy().argmax(-1)
    np.testing.assert_array_equal(layer.predict(hidden).numpy(), expected)
    # Force some rows into the tails: a head bias that favours the cluster logits.
    layer.head_bias.assign(np.r_[np.zeros(CUTOFFS[0]), np.full(len(CUTOFFS), 8.0)].astype("float32"))
    expected = layer.log_prob(hidden).numpy().argmax(-1)
    assert (expected >= CUTOFFS[0]).any()
    np.testing.assert_array_equal(layer.predict(hidden).numpy(), expected)


def test_training_never_builds_a_vocabulary_sized_tensor():
    """No op of the loss' graph has a dimension of vocabulary size (the head is 10+3 wide)."""
    layer = make()
    hidden, targets = data()
    graph = tf.function(layer.loss).get_concrete_function(
        tf.TensorSpec((None, None, DIM)), tf.TensorSpec((None, None), tf.int32)
    ).graph
    dims = {d for op in graph.get_operations() for t in op.outputs
            if t.shape.rank is not None for d in t.shape.as_list()}
    assert VOCAB not in dims
    # while log_prob does build it, so the check above can fail
    graph = tf.function(layer.log_prob).get_concrete_function(tf.TensorSpec((None, None, DIM))).graph
    dims = {d for op in graph.get_operations() for t in op.outputs
            if t.shape.rank is not None for d in t.shape.as_list()}
    assert VOCAB in dims


def test_mixed_precision_keeps_log_softmax_in_float32():
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, factor=2, dtype="mixed_bfloat16")
    layer.build((None, DIM))
    hidden, targets = data()
    hidden = tf.cast(hidden, "bfloat16")
    assert layer.log_prob(hidden).dtype == tf.float32
    assert layer.loss(hidden, targets).dtype == tf.float32
    np.testing.assert_allclose(np.exp(layer.log_prob(hidden).numpy()).sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "cutoffs, match",
    [
        ([20, 10], "sorted"),
        ([10, 10, 20], "repeat"),
        ([10, 50], r"\[1, 49\]"),
        ([0, 10], r"\[1, 49\]"),
        ([], "non-empty"),
    ],
)
def test_bad_cutoffs_raise_one_clear_error(cutoffs, match):
    with pytest.raises(ValueError, match=match):
        AdaptiveSoftmax(VOCAB, cutoffs)


def test_bad_targets_and_too_narrow_hidden_raise():
    layer = make()
    hidden, targets = data()
    targets[1, 2] = VOCAB
    with pytest.raises(ValueError, match="Target id 50 is outside the vocabulary"):
        layer.loss(hidden, targets)
    targets[1, 2] = -1
    with pytest.raises(ValueError, match="Target id -1"):
        layer.target_log_prob(hidden, targets)
    with pytest.raises(tf.errors.InvalidArgumentError, match="target id is >= vocabulary_size"):
        targets[1, 2] = VOCAB
        tf.function(layer.loss)(tf.constant(hidden), tf.constant(targets))
    narrow = AdaptiveSoftmax(VOCAB, CUTOFFS, factor=4)
    with pytest.raises(ValueError, match="at least factor\\*\\*len\\(cutoffs\\) = 64"):
        narrow.build((None, 32))


def test_serialisation_and_saving_round_trips(tmp_path):
    layer = make()
    hidden, targets = data()
    clone = AdaptiveSoftmax.from_config(layer.get_config())
    clone.build((None, DIM))
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(clone.log_prob(hidden).numpy(), layer.log_prob(hidden).numpy())

    inputs = keras.Input((None, DIM))
    model = keras.Model(inputs, AdaptiveSoftmax(VOCAB, CUTOFFS, factor=2)(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    again = keras.models.load_model(path)
    np.testing.assert_array_equal(again.predict(hidden, verbose=0), model.predict(hidden, verbose=0))


# ---- a fresh layer: every method builds it on first use ----------------------------------------
# Vocabulary 4, head {0, 1} + one cluster {2, 3}, hidden width 1, factor 1 (tail width 1). With the
# head kernel 0 and head bias log(.1, .2, .7), and hidden = 1 through a tail projection 1 and tail
# kernel (0, log 6): p = (.1, .2, .7 · 1/7, .7 · 6/7) = (.1, .2, .1, .6) exactly.
FRESH_P = np.array([0.1, 0.2, 0.1, 0.6])
FRESH_SHAPES = [(1, 3), (3,), (1, 1), (1, 2)]



@pytest.mark.parametrize("method", ["log_prob", "loss", "target_log_prob", "predict"])
def test_every_method_builds_a_fresh_layer_once_and_is_exact(method):
    layer = AdaptiveSoftmax(4, [2], factor=1)
    assert not layer.built
    out = first_use(layer, method)  # no AttributeError: the layer builds from hidden's last axis
    assert layer.built
    assert [tuple(w.shape) for w in layer.weights] == FRESH_SHAPES
    assert tuple(out.shape) == ((2, 3, 4) if method == "log_prob" else (2, 3))
    layer.head_kernel.assign(np.zeros((1, 3), "float32"))
    layer.head_bias.assign(np.log([0.1, 0.2, 0.7]).astype("float32"))
    layer.tail_projections[0].assign(np.ones((1, 1), "float32"))
    layer.tail_kernels[0].assign(np.array([[0.0, np.log(6.0)]], "float32"))

    check_output_layer(layer, FRESH_P, ("log_prob", "loss", "target_log_prob", "predict"))
    np.testing.assert_allclose(layer.head_bias.numpy(), np.log([0.1, 0.2, 0.7]), rtol=1e-6)


def test_a_fresh_layer_builds_inside_a_tf_function():
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, factor=2)
    hidden, targets = data(6)
    graph = tf.function(layer.loss)(tf.constant(hidden), tf.constant(targets)).numpy()
    assert layer.built and len(layer.weights) == 2 + 2 * len(CUTOFFS)
    np.testing.assert_allclose(graph, layer.loss(hidden, targets).numpy(), atol=1e-6)
