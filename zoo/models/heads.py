"""The output layer a model's config asks for."""

from layers import FullSoftmax


def make_head(vocabulary_size, cutoffs=None):
    if cutoffs:
        raise ValueError(
            f"cutoffs={cutoffs!r} asks for an adaptive softmax, which this version does not "
            "ship yet; leave cutoffs unset for a full softmax."
        )
    return FullSoftmax(vocabulary_size, name="head")
