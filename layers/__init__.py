"""Keras 3 layers of the zoo: gated convolutions, residual blocks and output layers."""

from layers.adaptive_softmax import AdaptiveSoftmax
from layers.gated_conv import GatedConv1D
from layers.residual import ResidualBlock, bottleneck_spec
from layers.softmax import FullSoftmax

__all__ = ["AdaptiveSoftmax", "GatedConv1D", "ResidualBlock", "bottleneck_spec", "FullSoftmax"]
