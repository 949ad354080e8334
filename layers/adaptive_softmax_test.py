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


# ---- fairseq's adaptive softmax: a head without bias, and the 2018 format ------------------------
def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _fairseq_reference(layer, h, prior_offset):
    """fairseq's get_log_prob written out: head log-softmax, then each cluster i's words at
    prior `head[cutoffs[0] + i - prior_offset]` + the cluster's own log-softmax."""
    head = _log_softmax(h @ layer.head_kernel.numpy())
    parts = [head[:, :CUTOFFS[0]]]
    for i in range(len(CUTOFFS)):
        tail = _log_softmax(h @ layer.tail_projections[i].numpy() @ layer.tail_kernels[i].numpy())
        parts.append(head[:, CUTOFFS[0] + i - prior_offset, None] + tail)
    return np.concatenate(parts, -1)


@pytest.mark.parametrize("fairseq_2018", [False, True])
def test_fairseq_head_without_bias_and_both_formats(fairseq_2018):
    dim = 64
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, use_bias=False, fairseq_2018=fairseq_2018)
    layer.build((None, dim))
    assert not hasattr(layer, "head_bias") and len(layer.weights) == 1 + 2 * len(CUTOFFS)
    # 2018: tail i projects to dim // 4**i (the first keeps the full width); today dim // 4**(i+1)
    widths = [p.shape[1] for p in layer.tail_projections]
    assert widths == ([64, 16, 4] if fairseq_2018 else [16, 4, 1])
    rng = np.random.default_rng(3)
    h = rng.normal(size=(40, dim)).astype("float32")
    targets = rng.integers(0, VOCAB, size=40).astype("int32")
    targets[:6] = [0, 9, 10, 19, 35, 49]
    expected = _fairseq_reference(layer, h.astype(np.float64), 1 if fairseq_2018 else 0)
    log_prob = layer.log_prob(h).numpy()
    np.testing.assert_allclose(log_prob, expected, atol=1e-5)
    gathered = np.take_along_axis(log_prob, targets[:, None], -1)[:, 0]
    np.testing.assert_allclose(layer.loss(h, targets).numpy(), -gathered, atol=1e-5)
    np.testing.assert_array_equal(layer.predict(h).numpy(), log_prob.argmax(-1))
    if fairseq_2018:  # the last head word's column is also cluster 0's prior: no longer normalised
        assert np.abs(np.exp(log_prob).sum(-1) - 1).max() > 1e-3


def test_fairseq_2018_predict_reaches_the_tail_through_the_lower_prior():
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, use_bias=False, fairseq_2018=True)
    layer.build((None, 16))
    # head column cutoffs[0] dominates: cluster 1's prior in 2018 (cluster 0's today); cluster 1's
    # tail puts its mass on word 23, so the best word is 23 (a word of cluster 0 under today's prior)
    head = np.zeros((16, CUTOFFS[0] + len(CUTOFFS)), "float32")
    head[0] = -5.0
    head[0, CUTOFFS[0]] = 5.0
    layer.head_kernel.assign(head)
    projection = np.zeros((16, 4), "float32")
    projection[0, 0] = 1.0
    layer.tail_projections[1].assign(projection)
    kernel = np.zeros((4, CUTOFFS[2] - CUTOFFS[1]), "float32")
    kernel[0, 3] = 10.0
    layer.tail_kernels[1].assign(kernel)
    h = np.eye(16, dtype="float32")[:1]
    assert layer.predict(h).numpy().tolist() == [23]
    assert layer.log_prob(h).numpy().argmax(-1).tolist() == [23]


def test_fairseq_options_round_trip_and_stay_out_of_default_configs():
    assert {"use_bias", "fairseq_2018"}.isdisjoint(make().get_config())
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, use_bias=False, fairseq_2018=True)
    again = AdaptiveSoftmax.from_config(layer.get_config())
    assert again.use_bias is False and again.fairseq_2018 is True
    with pytest.raises(ValueError, match="fairseq_2018 must be True or False, got 1"):
        AdaptiveSoftmax(VOCAB, CUTOFFS, fairseq_2018=1)
    with pytest.raises(ValueError, match=r"at least factor\*\*\(len\(cutoffs\) - 1\) = 16"):
        AdaptiveSoftmax(VOCAB, CUTOFFS, fairseq_2018=True).build((None, 8))
