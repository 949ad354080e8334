"""The output layer a model's config asks for."""

from zoo.layers import AdaptiveSoftmax, FullSoftmax


def make_head(vocabulary_size, cutoffs=None, factor=4):
    """A full softmax, or an adaptive softmax when `cutoffs` are given."""
    if cutoffs:
        return AdaptiveSoftmax(vocabulary_size, list(cutoffs), factor=factor, name="head")
    return FullSoftmax(vocabulary_size, name="head")
