"""Keras 3 layers of the zoo: gated convolutions, residual blocks, output layers, sparse MoE."""

from layers.adaptive_softmax import AdaptiveSoftmax
from layers.gated_conv import GatedConv1D
from layers.residual import ResidualBlock, bottleneck_spec
from layers.softmax import FullSoftmax
from layers.sparse_moe import SparseMoE

__all__ = ["AdaptiveSoftmax", "GatedConv1D", "ResidualBlock", "bottleneck_spec", "FullSoftmax", "SparseMoE"]
