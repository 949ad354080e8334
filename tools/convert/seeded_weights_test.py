"""`seeded_weights`: the same tensors from the same seed and index, scaled by their kind."""

import numpy as np

from zoo.tools.convert import seeded_weights


def test_each_tensor_is_drawn_from_its_seed_and_index_alone_and_scaled_by_kind():
    names = ["decoder.embed_tokens.weight", "decoder.fc1.weight_g", "decoder.fc1.weight_v", "decoder.fc1.bias",
             "decoder.adaptive_softmax.head.weight"]
    shapes = [[6, 4], [5, 1], [5, 4], [5], [7, 16]]
    state = seeded_weights.state_dict(3, names, shapes)
    assert [list(v.shape) for v in state.values()] == shapes and all(v.dtype == np.float32 for v in state.values())
    raw = lambda i, shape: np.random.default_rng([3, i]).standard_normal(shape, dtype=np.float32)
    np.testing.assert_array_equal(state[names[0]], raw(0, (6, 4)) * np.float32(0.1))
    np.testing.assert_array_equal(state[names[1]], np.abs(raw(1, (5, 1))) * np.float32(0.5) + np.float32(0.5))
    np.testing.assert_array_equal(state[names[2]], raw(2, (5, 4)))
    np.testing.assert_array_equal(state[names[4]], raw(4, (7, 16)) / np.float32(4))
    # a tensor does not depend on the others: the same index gives the same values in another list
    again = seeded_weights.state_dict(3, ["x", "y", "decoder.fc1.weight_v"], [[1], [1], [5, 4]])
    np.testing.assert_array_equal(again["decoder.fc1.weight_v"], state[names[2]])
    assert not np.array_equal(seeded_weights.state_dict(4, names, shapes)[names[2]], state[names[2]])
