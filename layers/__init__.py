"""Keras 3 layers of the zoo: gated convolutions, residual blocks, output layers, the sparse MoE with
its router and experts, and the recurrent and feed-forward layers of the Appendix C stacks."""

from zoo.layers.adaptive_softmax import AdaptiveSoftmax
from zoo.layers.feed_forward import FeedForward
from zoo.layers.gated_conv import GatedConv1D
from zoo.layers.moe_experts import FeedForwardExperts
from zoo.layers.moe_router import NoisyTopKRouter, Routing
from zoo.layers.projected_lstm import ProjectedLSTMCell
from zoo.layers.residual import ResidualBlock, bottleneck_spec
from zoo.layers.softmax import FullSoftmax, TiedSoftmax
from zoo.layers.sparse_moe import SparseMoE

__all__ = ["AdaptiveSoftmax", "FeedForward", "FeedForwardExperts", "GatedConv1D", "NoisyTopKRouter", "Routing",
           "ProjectedLSTMCell", "ResidualBlock", "bottleneck_spec", "FullSoftmax", "SparseMoE", "TiedSoftmax"]
