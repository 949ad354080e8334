"""`StateLayout`: the decoding state's named tensors, their shapes, and the round trip back to
the nested state `model.step` takes."""

import numpy as np
import pytest

from zoo.export.state import StateLayout


def built(tiny_model, family):
    model = tiny_model(family)
    model(np.zeros((1, 4), "int32"))
    return model


def test_gcnn_names_each_buffer_of_k_minus_1_inputs_and_sends_no_empty_one(tiny_model):
    layout = StateLayout(built(tiny_model, "gcnn"))
    # width-1 convolutions keep an empty buffer: not sent
    assert layout.specs == {"state_block_0_conv_0": (2, 8), "state_block_1_conv_1": (2, 4),
                            "state_block_2_conv_1": (4, 4)}
    assert [spec.name for spec in layout.tensor_specs()] == list(layout.specs)
    assert layout.tensor_specs()[2].shape.as_list() == [None, 4, 4]


def test_a_stack_names_h_and_c_of_each_lstm_by_its_position(tiny_model):
    layout = StateLayout(built(tiny_model, "moe"))  # LSTM, MoE (no state), LSTM
    assert layout.specs == {"state_lstm_0_h": (8,), "state_lstm_0_c": (8,),
                            "state_lstm_2_h": (8,), "state_lstm_2_c": (8,)}


@pytest.mark.parametrize("family", ["gcnn", "moe"])
def test_flatten_then_unflatten_gives_the_state_back(tiny_model, family):
    model = built(tiny_model, family)
    layout = StateLayout(model)
    rng = np.random.default_rng(0)
    named = {name: rng.standard_normal((3,) + shape).astype("float32") for name, shape in layout.specs.items()}
    nested = layout.unflatten(named, 3)
    flat = layout.flatten(nested)
    assert list(flat) == list(named)
    for name in named:
        np.testing.assert_array_equal(flat[name].numpy(), named[name])
    # the empty buffers are recreated with the batch axis
    shapes = [tuple(leaf.shape) for block in nested for leaf in (block if isinstance(block, list) else [block])]
    assert all(shape[0] == 3 for shape in shapes)
