"""Tests of `layers.ProjectedLSTMCell` against a numpy reference of the projected LSTM."""

import keras
import numpy as np
import pytest

from tests.layer_checks import keras_file_round_trip
from zoo.layers import ProjectedLSTMCell

INPUT, UNITS, PROJECTION = 5, 6, 3


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_step(x, h, c, kernel, recurrent_kernel, bias, projection_kernel):
    """One step in float64: gates i, f, g, o from `x·W + h·U + b`, the new cell state, and the
    projected output `(o ⊙ tanh(c))·P`, which is also the next recurrent input."""
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = np.split(z, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    h = (_sigmoid(o) * np.tanh(c)) @ projection_kernel
    return h, c


def _cell(seed=0):
    cell = ProjectedLSTMCell(UNITS, PROJECTION)
    cell.build((None, INPUT))
    rng = np.random.default_rng(seed)
    for weight in cell.weights:
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    return cell


def test_weights_are_the_lstm_s_four_gates_and_a_projection():
    cell = ProjectedLSTMCell(UNITS, PROJECTION)
    cell.build((None, INPUT))
    shapes = {w.name: tuple(w.shape) for w in cell.weights}
    assert shapes == {"kernel": (INPUT, 4 * UNITS), "recurrent_kernel": (PROJECTION, 4 * UNITS),
                      "bias": (4 * UNITS,), "projection_kernel": (UNITS, PROJECTION)}
    # the recurrent input is the projection: the state is [h·P, c]
    assert cell.state_size == [PROJECTION, UNITS] and cell.output_size == PROJECTION
    # the forget gate (the second quarter) starts open, as Keras' LSTM's does
    np.testing.assert_array_equal(cell.bias.numpy(), np.repeat([0.0, 1.0, 0.0, 0.0], UNITS))


def test_a_sequence_follows_the_reference_step_by_step():
    cell = _cell()
    x = np.random.default_rng(1).normal(size=(2, 7, INPUT)).astype("float32")
    rnn = keras.layers.RNN(cell, return_sequences=True)
    got = rnn(x).numpy()
    weights = [w.numpy().astype(np.float64) for w in (cell.kernel, cell.recurrent_kernel, cell.bias,
                                                       cell.projection_kernel)]
    h, c = np.zeros((2, PROJECTION)), np.zeros((2, UNITS))
    for t in range(x.shape[1]):
        h, c = reference_step(x[:, t].astype(np.float64), h, c, *weights)
        np.testing.assert_allclose(got[:, t], h, rtol=1e-5, atol=1e-6)


def test_saved_under_its_registered_name_and_reloaded(tmp_path):
    inputs = keras.Input((None, INPUT))
    outputs = keras.layers.RNN(ProjectedLSTMCell(UNITS, PROJECTION), return_sequences=True, name="rnn")(inputs)
    model = keras.Model(inputs, outputs)
    assert keras.saving.get_registered_name(ProjectedLSTMCell) == "zoo>ProjectedLSTMCell"
    x = np.random.default_rng(2).normal(size=(2, 4, INPUT)).astype("float32")
    cell = keras_file_round_trip(model, x, tmp_path).get_layer("rnn").cell
    assert isinstance(cell, ProjectedLSTMCell) and (cell.units, cell.projection) == (UNITS, PROJECTION)


@pytest.mark.parametrize("units, projection", [(4, 4), (8, 2)])
def test_config_round_trip(units, projection):
    cell = ProjectedLSTMCell(units, projection, name="lstmp")
    clone = ProjectedLSTMCell.from_config(cell.get_config())
    assert (clone.units, clone.projection, clone.name) == (units, projection, "lstmp")


@pytest.mark.parametrize("units, projection, says", [(0, 4, "units must be an integer >= 1, got 0"),
                                                     (8, -1, "projection must be an integer >= 1, got -1")])
def test_bad_widths_are_one_sentence_naming_the_value(units, projection, says):
    with pytest.raises(ValueError, match=says):
        ProjectedLSTMCell(units, projection)
