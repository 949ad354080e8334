"""int8 weights with a scale per output channel: the arithmetic on a hand example and its error
bound, and each quantizable layer computing with `q · scale` exactly, step by step as in a call."""

import keras
import numpy as np
import pytest

from zoo.layers import AdaptiveSoftmax, FullSoftmax, GatedConv1D, ProjectedLSTMCell, int8


def test_a_hand_example_rounds_each_column_to_its_own_scale():
    q, scale = int8.quantize_array(np.array([[1.0, -2.0, 0.0], [0.5, 4.0, 0.0]]), axis=-1)
    np.testing.assert_allclose(scale, [1 / 127, 4 / 127, 1.0], rtol=1e-6)  # an all-zero column keeps 1
    # 0.5 / (1/127) = 63.5 and -2 / (4/127) = -63.5 round to even: 64 and -64
    assert q.dtype == np.int8 and q.tolist() == [[127, -64, 0], [64, 127, 0]]


@pytest.mark.parametrize("axis", [-1, 0])
def test_the_error_is_at_most_half_a_step_of_the_columns_scale(axis):
    values = np.random.default_rng(0).standard_normal((7, 5, 6)).astype(np.float32) * np.arange(1, 7)
    q, scale = int8.quantize_array(values, axis=axis)
    shape = [1, 1, 1]
    shape[axis] = -1
    step = scale.reshape(shape)
    error = np.abs(q * step - values)
    assert (error <= step / 2 + 1e-7).all()
    assert (np.abs(q).max(axis=tuple(i for i in range(3) if i != axis % 3)) == 127).all()


def _dequantized(layer, variable):
    return np.asarray(int8.read(layer, variable))


def test_a_gated_convolution_folds_weight_norm_into_int8_and_steps_as_it_calls():
    keras.utils.set_random_seed(0)
    conv = GatedConv1D(6, 3)
    x = np.random.default_rng(1).standard_normal((2, 7, 4)).astype(np.float32)
    float_out = np.asarray(conv(x))
    effective = np.asarray(conv.effective_kernel())
    conv.quantize("int8")
    assert {v.name: v.dtype for v in conv.weights} == {"bias": "float32", "kernel": "int8", "kernel_scale": "float32"}
    kernel = _dequantized(conv, conv.kernel)
    assert np.abs(kernel - effective).max() <= np.abs(effective).max() / 254 + 1e-7
    out = np.asarray(conv(x))
    padded = np.pad(x, [[0, 0], [2, 0], [0, 0]])
    z = np.stack([np.einsum("bki,kio->bo", padded[:, t:t + 3], kernel) for t in range(7)], 1) + np.asarray(conv.bias)
    a, gate = np.split(z, 2, -1)
    np.testing.assert_allclose(out, a / (1 + np.exp(-gate)), atol=1e-5)  # equation (1) with q · scale
    assert np.abs(out - float_out).max() < 0.05
    state = conv.initial_state(2, 4)
    with conv.kernel_computed_once():
        for t in range(7):
            y, state = conv.step(x[:, t], state)
            np.testing.assert_allclose(np.asarray(y), out[:, t], atol=1e-5)


def test_twice_or_an_unknown_mode_is_one_sentence():
    conv = GatedConv1D(2, 2)
    conv.build((None, None, 3))
    with pytest.raises(ValueError, match=r"^Unknown quantization mode 'int4'; the zoo's models quantize to 'int8'"):
        conv.quantize("int4")
    conv.quantize("int8")
    with pytest.raises(ValueError, match="already quantized to int8"):
        conv.quantize("int8")


@pytest.mark.parametrize("fairseq_2018", [False, True])
def test_an_adaptive_softmax_in_int8_is_still_a_distribution_computed_from_its_dequantized_weights(fairseq_2018):
    keras.utils.set_random_seed(0)
    head = AdaptiveSoftmax(60, [10, 30], fairseq_2018=fairseq_2018)
    hidden = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    float_lp = np.asarray(head.log_prob(hidden))
    head.quantize("int8")
    assert sorted(v.dtype for v in head.trainable_weights) == ["float32"]  # the head's bias alone
    assert [v.dtype for v in (head.head_kernel, *head.tail_projections, *head.tail_kernels)] == ["int8"] * 5
    lp = np.asarray(head.log_prob(hidden))
    # what a float head holding the dequantized weights computes
    reference = AdaptiveSoftmax(60, [10, 30], fairseq_2018=fairseq_2018)
    reference.build((None, 16))
    reference.head_kernel.assign(_dequantized(head, head.head_kernel))
    reference.head_bias.assign(head.head_bias)
    for i in range(2):
        reference.tail_projections[i].assign(_dequantized(head, head.tail_projections[i]))
        reference.tail_kernels[i].assign(_dequantized(head, head.tail_kernels[i]))
    np.testing.assert_allclose(lp, np.asarray(reference.log_prob(hidden)), atol=1e-5)
    targets = np.array([0, 15, 59])
    np.testing.assert_allclose(np.asarray(head.target_log_prob(hidden, targets)), lp[np.arange(3), targets], atol=1e-5)
    assert np.abs(lp - float_lp).max() < 0.05


def test_a_full_softmax_and_an_lstmp_cell_compute_with_q_times_scale():
    keras.utils.set_random_seed(0)
    head = FullSoftmax(20)
    hidden = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    float_lp = np.asarray(head.log_prob(hidden))
    head.quantize("int8")
    kernel = _dequantized(head, head.kernel)
    logits = hidden @ kernel + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head.log_prob(hidden)),
                               logits - np.log(np.exp(logits).sum(-1, keepdims=True)), atol=1e-5)
    assert np.abs(np.asarray(head.log_prob(hidden)) - float_lp).max() < 0.05

    cell = ProjectedLSTMCell(6, 4)
    cell.build((None, 5))
    x = np.random.default_rng(4).standard_normal((2, 5)).astype(np.float32)
    states = [np.zeros((2, 4), np.float32), np.zeros((2, 6), np.float32)]
    float_h, _ = cell(x, states)
    cell.quantize("int8")
    assert {v.dtype for v in (cell.kernel, cell.recurrent_kernel, cell.projection_kernel)} == {"int8"}
    h, _ = cell(x, states)
    z = x @ _dequantized(cell, cell.kernel) + np.asarray(cell.bias)
    i, f, g, o = np.split(z, 4, -1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    expected = (sig(o) * np.tanh(sig(i) * np.tanh(g))) @ _dequantized(cell, cell.projection_kernel)
    np.testing.assert_allclose(np.asarray(h), expected, atol=1e-5)
    assert np.abs(np.asarray(h) - np.asarray(float_h)).max() < 0.05
