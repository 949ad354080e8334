"""Keras 3 layers of the zoo: gated convolutions, residual blocks, output layers, sparse MoE."""

from zoo.layers.adaptive_softmax import AdaptiveSoftmax
from zoo.layers.gated_conv import GatedConv1D
from zoo.layers.residual import ResidualBlock, bottleneck_spec
from zoo.layers.softmax import FullSoftmax
from zoo.layers.sparse_moe import SparseMoE

__all__ = ["AdaptiveSoftmax", "GatedConv1D", "ResidualBlock", "bottleneck_spec", "FullSoftmax", "SparseMoE"]
