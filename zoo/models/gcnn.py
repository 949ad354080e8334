"""The gated convolutional language model (Dauphin et al. 2016, Figure 1)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import keras
import tensorflow as tf

from zoo.layers import int8
from zoo.layers import AdaptiveSoftmax, FeedForward, GatedConv1D, ResidualBlock, SparseMoE, TiedSoftmax
from zoo.layers.residual import check_block_spec
from zoo.layers.validation import check_int, check_rate, is_int
from zoo.models.base import LanguageModel


class GCNNLanguageModel(LanguageModel):
    """Embedding lookup → residual blocks of causal gated convolutions → output layer.

    Args:
        vocabulary_size: number of token ids (ids sorted by frequency).
        embedding_dim: the "Lookup" row of Table 1.
        blocks: a list of residual blocks, each a list of `[kernel_size, width]` layers
            (one pair for a plain block, three for a bottleneck block).
        activation: the gate of every conv layer ("glu" by default; §5.2's ablations).
        weight_norm: weight normalisation of every conv layer (§4.2).
        dropout: dropout on the input of every conv layer and of the output layer.
        cutoffs: adaptive-softmax cutoffs, or None for a full softmax.
        tie_embeddings: the output layer's projection is the transpose of the input embedding
            (a full softmax only, and the last block's width must equal `embedding_dim`).
        embedding_dropout: dropout on the embedding's output (both paths of the first block).
        moe: None, or a dict of `layers.SparseMoE` arguments plus `after_blocks` (block indices):
            a sparse mixture of experts is added as a residual branch after each of those blocks
            (`x + MoE(x)`, all positions of all sequences gated as one batch, §3.1 of Shazeer
            et al.) — the combination §5.1 of the GCNN paper names as its next step.
        feed_forward: None, or a dict `{"after_blocks": [...], "hidden_units": h}`: a dense
            feed-forward residual branch (`x + FFN(x)`, a ReLU layer of width h, then a linear
            layer back to the block's width: `layers.FeedForward`) after each of those blocks.
            With `h = k · hidden_units` of a `moe` it is that mixture's dense twin at the same
            computation per token (Table 7's MoE-1-Wide; `zoo.models.compute`).
        optimizer: the preset's own optimiser spec (see `zoo.optimizers`), None for the paper's.

    The options below express fairseq's convolutional language models (`fconv_lm`, the
    authors' released GCNNs) exactly; their defaults are the zoo's own GCNN:

        input_projection: a weight-normalised width-1 linear layer (with bias) from the
            embedding to the first block's width before the first block (fairseq's `fc1`).
        residual: True, or one boolean per block: False drops that block's skip path
            (fairseq's residual 0).
        residual_scale: each residual sum is multiplied by it (fairseq: √0.5).
        output_projection: None, or the width of a weight-normalised width-1 linear layer (with
            bias) between the last block and a full softmax (fairseq's `fc2`, in an `fconv_lm`
            without an adaptive softmax).
        head_bias: the adaptive softmax's head has a bias (fairseq's has none).
        adaptive_softmax_2018: the adaptive softmax of fairseq's 2018 checkpoints
            (`layers.AdaptiveSoftmax`'s `fairseq_2018`).

    Example: a plain GLU block of kernel 3 and a bottleneck block of kernel 5 (Table 1's two
    kinds), with an adaptive softmax.

    >>> import numpy as np, zoo
    >>> from zoo.layers import bottleneck_spec
    >>> lm = zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=16, cutoffs=[10, 30],
    ...                            blocks=[[[3, 16]], bottleneck_spec(5, narrow=8, wide=16)])
    >>> lm.receptive_field, type(lm.head).__name__  # 1 + (3 - 1) + (5 - 1) tokens
    (7, 'AdaptiveSoftmax')
    >>> log_probs = lm.log_probs(np.array([[1, 2, 3, 4, 5]]))
    >>> log_probs.shape, bool(np.allclose(np.exp(log_probs).sum(-1), 1, atol=1e-5))
    ((1, 5, 50), True)
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int = 128,
        blocks: Sequence[Sequence[int] | Sequence[Sequence[int]]] = ((4, 128),),
        activation: str = "glu",
        weight_norm: bool = True,
        dropout: float = 0.0,
        cutoffs: Sequence[int] | None = None,
        moe: dict[str, Any] | None = None,
        optimizer: dict[str, Any] | None = None,
        feed_forward: dict[str, Any] | None = None,
        tie_embeddings: bool = False,
        embedding_dropout: float = 0.0,
        input_projection: bool = False,
        output_projection: int | None = None,
        residual: bool | Sequence[bool] = True,
        residual_scale: float = 1.0,
        head_bias: bool = True,
        adaptive_softmax_2018: bool = False,
        **kwargs,
    ):
        super().__init__(vocabulary_size=vocabulary_size, optimizer=optimizer, **kwargs)
        self._set_options(blocks, embedding_dim, activation, weight_norm, dropout, cutoffs, residual, residual_scale,
                          input_projection, output_projection, head_bias, adaptive_softmax_2018)
        # the layers, in the order they have always been made (their weights' order in a saved file)
        self._make_trunk(vocabulary_size)
        self._make_branches(moe, feed_forward)
        self.output_dropout = keras.layers.Dropout(dropout) if dropout else None
        self.tie_embeddings = _check_tie(tie_embeddings, cutoffs, embedding_dim, self.hidden_dim)
        if self.tie_embeddings:
            self.head = TiedSoftmax(vocabulary_size, embeddings=lambda: int8.embedding_matrix(self.embedding), name="head")
        elif not head_bias or adaptive_softmax_2018:
            self.head = AdaptiveSoftmax(vocabulary_size, list(cutoffs), use_bias=head_bias,
                                        fairseq_2018=adaptive_softmax_2018, name="head")
        else:
            self.head = self.make_head(cutoffs)
        self.embedding_dropout = check_rate("embedding_dropout", embedding_dropout)
        self.embedding_dropout_layer = keras.layers.Dropout(embedding_dropout) if embedding_dropout else None
        # Every weight now, so that a fresh model can be saved, counted and stepped.
        self.build()

    def _set_options(self, blocks, embedding_dim, activation, weight_norm, dropout, cutoffs, residual, residual_scale,
                     input_projection, output_projection, head_bias, adaptive_softmax_2018):
        """Checks and keeps the network's options (the blocks, the projections, the output layer's)."""
        if not isinstance(blocks, (list, tuple)):
            raise ValueError("blocks must be a list of residual blocks, each a list of [kernel_size, width] pairs "
                             f"(e.g. [[[4, 128]], [[4, 128]]]), got {blocks!r}.")
        if not blocks:
            raise ValueError("A GCNN needs at least one residual block; got blocks=[].")
        check_rate("dropout", dropout)
        check_int("embedding_dim", embedding_dim, minimum=1)
        blocks = [[list(pair)] if _is_pair(pair) else pair for pair in blocks]
        self.blocks_config = [check_block_spec(b) for b in blocks]
        self.embedding_dim = embedding_dim
        self.activation = activation
        self.weight_norm = weight_norm
        self.dropout = dropout
        self.cutoffs = cutoffs
        self.residual = _check_residual(residual, len(self.blocks_config))
        self.residual_scale = residual_scale
        for name, value in (("input_projection", input_projection), ("head_bias", head_bias),
                            ("adaptive_softmax_2018", adaptive_softmax_2018)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}.")
        if (not head_bias or adaptive_softmax_2018) and not cutoffs:
            raise ValueError("head_bias=False and adaptive_softmax_2018=True are options of an adaptive softmax; "
                             "give cutoffs too.")
        if output_projection is not None and (not is_int(output_projection) or output_projection < 1):
            raise ValueError(f"output_projection must be None or a width >= 1, got {output_projection!r}.")
        self.input_projection = input_projection
        self.output_projection = output_projection
        self.head_bias = head_bias
        self.adaptive_softmax_2018 = adaptive_softmax_2018

    def _make_trunk(self, vocabulary_size):
        """The embedding, the optional projections and the residual blocks."""
        weight_norm = self.weight_norm
        self.embedding = keras.layers.Embedding(vocabulary_size, self.embedding_dim, name="embedding")
        self.input_projection_layer = None
        if self.input_projection:
            self.input_projection_layer = GatedConv1D(self.blocks_config[0][0][1], 1, activation="linear",
                                                      weight_norm=weight_norm, name="input_projection")
        self.output_projection_layer = None
        if self.output_projection is not None:
            self.output_projection_layer = GatedConv1D(self.output_projection, 1, activation="linear",
                                                       weight_norm=weight_norm, name="output_projection")
        self.blocks = [
            ResidualBlock(spec, activation=self.activation, weight_norm=weight_norm, dropout=self.dropout,
                          name=f"block_{i}",
                          **({} if self.residual[i] else {"residual": False}),
                          **({} if self.residual_scale == 1.0 else {"residual_scale": self.residual_scale}))
            for i, spec in enumerate(self.blocks_config)
        ]

    def _make_branches(self, moe, feed_forward):
        """The mixtures of experts and feed-forward layers after the blocks their configs name."""
        self.moe = dict(moe) if moe else None
        self.moe_layers = []
        self._moe_after = {}  # block index -> position in self.moe_layers
        if self.moe:
            args = {k: v for k, v in self.moe.items() if k != "after_blocks"}
            for i in self._after_blocks("moe", self.moe):
                self._moe_after[i] = len(self.moe_layers)
                self.moe_layers.append(SparseMoE(name=f"moe_{i}", **args))
        self.feed_forward = _check_feed_forward(feed_forward)
        self.feed_forward_layers = []
        self._feed_forward_after = {}  # block index -> position in self.feed_forward_layers
        if self.feed_forward:
            for i in self._after_blocks("feed_forward", self.feed_forward):
                if i in self._moe_after:
                    raise ValueError(f"Block {i} is followed by a mixture of experts already (moe after_blocks); "
                                     "feed_forward after_blocks must name other blocks.")
                self._feed_forward_after[i] = len(self.feed_forward_layers)
                self.feed_forward_layers.append(FeedForward([self.feed_forward["hidden_units"]],
                                                            self.blocks_config[i][-1][1], name=f"feed_forward_{i}"))

    def build(self, input_shape: tuple[int | None, ...] | None = None) -> None:
        super().build(input_shape)  # the output layer first (see LanguageModel.build)
        self.embedding.build((None, None))
        dim = self.embedding_dim
        if self.input_projection_layer is not None:
            self.input_projection_layer.build((None, None, dim))
            dim = self.input_projection_layer.filters
        for i, block in enumerate(self.blocks):
            block.build((None, None, dim))
            dim = block.layer_specs[-1][1]
            branch = self.branch_after(i)
            if branch is not None:
                branch.build((None, None, dim))
        if self.output_projection_layer is not None:
            self.output_projection_layer.build((None, None, dim))

    @property
    def hidden_dim(self) -> int:
        """The width `call` returns: the last block's (or the output projection's)."""
        return self.output_projection or self.blocks_config[-1][-1][1]

    @property
    def receptive_field(self) -> int:
        """How many tokens (the current one included) position t can see."""
        return 1 + sum(k - 1 for block in self.blocks_config for k, _ in block)

    @property
    def stream_context(self) -> int:
        """Tokens of left context a stream window needs: the receptive field less one."""
        return self.receptive_field - 1

    @property
    def exact_windows(self) -> bool:
        """Whether windows with `stream_context` tokens of left context score a long line exactly
        as one sequence does: yes, the context covers the receptive field (the mixture-of-experts
        layers' capacity depends on the batch, so not with them)."""
        return not self._moe_after

    def call(self, token_ids: tf.Tensor, training: bool | None = None, track_metrics: bool = True) -> tf.Tensor:
        """`track_metrics=False`: no mixture of experts updates its balance metrics (a served
        graph keeps no state)."""
        x = self.embedding(token_ids)
        if self.embedding_dropout_layer is not None:
            x = self.embedding_dropout_layer(x, training=training)
        if self.input_projection_layer is not None:
            x = self.input_projection_layer(x)
        for i, block in enumerate(self.blocks):
            x = self._branch(i, block(x, training=training), training, track_metrics)
        if self.output_projection_layer is not None:
            x = self.output_projection_layer(x)
        if self.output_dropout is not None:
            x = self.output_dropout(x, training=training)
        return x

    def _after_blocks(self, key, spec):
        """The block indices of `spec["after_blocks"]`, each in range and named once."""
        indices = spec.get("after_blocks", [])
        if not isinstance(indices, (list, tuple)):
            raise ValueError(f"{key} after_blocks must be a list of block indices, got {indices!r}.")
        for i in indices:
            if not is_int(i) or not 0 <= i < len(self.blocks):
                raise ValueError(f"{key} after_blocks must be block indices in [0, {len(self.blocks) - 1}], got {i!r}.")
        if len(set(indices)) != len(indices):
            raise ValueError(f"{key} after_blocks names a block twice: {list(indices)!r}.")
        return list(indices)

    def branch_after(self, i: int) -> SparseMoE | FeedForward | None:
        """The residual branch after block i (a `SparseMoE` or a `FeedForward`), or None."""
        if i in self._moe_after:
            return self.moe_layers[self._moe_after[i]]
        if i in self._feed_forward_after:
            return self.feed_forward_layers[self._feed_forward_after[i]]
        return None

    def _branch(self, i, x, training, track_metrics=False):
        """`x + branch(x)` after block i, or `x` where no branch follows it; a mixture of experts
        updates its balance metrics only with `track_metrics`."""
        if i in self._moe_after:
            return x + self.moe_layers[self._moe_after[i]](x, training=training, track_metrics=track_metrics)
        if i in self._feed_forward_after:
            return x + self.feed_forward_layers[self._feed_forward_after[i]](x)
        return x

    def initial_state(self, batch_size: int | tf.Tensor) -> list[list[tf.Tensor]]:
        """Each conv layer's `kernel_size - 1` zero inputs, block by block."""
        states, dim = [], self.embedding_dim
        if self.input_projection_layer is not None:
            dim = self.input_projection_layer.filters
        for block in self.blocks:
            states.append(block.initial_state(batch_size, dim))
            dim = block.layer_specs[-1][1]
        return states

    def state_name(self, path: Sequence[int]) -> str:
        """`state_block_<i>_conv_<j>`: the last k−1 inputs of conv layer j of residual block i."""
        if len(path) == 2:
            return f"state_block_{path[0]}_conv_{path[1]}"
        return super().state_name(path)

    def step(self, token_ids: tf.Tensor, state: list[list[tf.Tensor]]) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """`<int>[batch]` ids and the state `initial_state` or `step` gave: `(hidden [batch,
        hidden_dim], state)`, what `call` gives at this position."""
        x = self.embedding(token_ids)
        if self.input_projection_layer is not None:
            x = self.input_projection_layer(x[:, None, :])[:, 0, :]
        new_state = []
        for i, (block, s) in enumerate(zip(self.blocks, state)):
            x, s = block.step(x, s)
            new_state.append(s)
            x = self._branch(i, x, training=False)
        if self.output_projection_layer is not None:
            x = self.output_projection_layer(x[:, None, :])[:, 0, :]
        return x, new_state

    @contextlib.contextmanager
    def loop_invariants(self, split_products: bool = True) -> Iterator[None]:
        """While a decoding loop is traced (`zoo.models.generation`): every conv layer's
        `g · v / ‖v‖` computed once, outside the loop, instead of at every token;
        `split_products`: `GatedConv1D.kernel_computed_once`'s."""
        with contextlib.ExitStack() as stack:
            for block in self.blocks:
                for conv in block.convs + ([block.projection] if block.projection is not None else []):
                    stack.enter_context(conv.kernel_computed_once(split_products))
            yield

    def prefill(self, token_ids: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """The whole prompt in one parallel pass: the convolutions over every position at once,
        each conv layer's state (its last k−1 inputs) gathered at each row's length."""
        x = self.embedding(token_ids)
        if self.input_projection_layer is not None:
            x = self.input_projection_layer(x)
        states = []
        for i, block in enumerate(self.blocks):
            x, s = block.prefill(x, lengths)
            states.append(s)
            x = self._branch(i, x, training=False)
        last = tf.gather(x, lengths - 1, batch_dims=1)
        if self.output_projection_layer is not None:
            last = self.output_projection_layer(last[:, None, :])[:, 0, :]
        return last, states

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "embedding_dim": self.embedding_dim,
                "blocks": self.blocks_config,
                "activation": self.activation,
                "weight_norm": self.weight_norm,
                "dropout": self.dropout,
                "cutoffs": self.cutoffs,
                "moe": self.moe,
                "tie_embeddings": self.tie_embeddings,
                "embedding_dropout": self.embedding_dropout,
            }
        )
        # fairseq's options only when set, so that every other preset's config stays as it was
        for name, default in (("input_projection", False), ("residual_scale", 1.0), ("head_bias", True),
                              ("adaptive_softmax_2018", False)):
            if getattr(self, name) != default:
                config[name] = getattr(self, name)
        if not all(self.residual):
            config["residual"] = list(self.residual)
        if self.output_projection is not None:
            config["output_projection"] = self.output_projection
        if self.feed_forward is not None:
            config["feed_forward"] = self.feed_forward
        return config


def _check_tie(tie, cutoffs, embedding_dim, hidden_dim):
    if not isinstance(tie, bool):
        raise ValueError(f"tie_embeddings must be True or False, got {tie!r}.")
    if tie and cutoffs:
        raise ValueError(f"tie_embeddings=True ties a full softmax to the embedding; got cutoffs={cutoffs!r} "
                         "(an adaptive softmax). Set cutoffs=None to tie.")
    if tie and embedding_dim != hidden_dim:
        raise ValueError(f"tie_embeddings=True needs the last block's width ({hidden_dim}) to equal "
                         f"embedding_dim ({embedding_dim}).")
    return tie


def _check_feed_forward(spec):
    """None, or `{"after_blocks": [...], "hidden_units": h}` with h a positive integer."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) != {"after_blocks", "hidden_units"}:
        raise ValueError('feed_forward must be None or a dict {"after_blocks": [block indices], "hidden_units": '
                         f"width}}, got {spec!r}.")
    check_int("feed_forward hidden_units", spec["hidden_units"], minimum=1)
    return dict(spec)


def _check_residual(residual, n_blocks):
    """One boolean per block: True (every block) or a list of them."""
    if isinstance(residual, bool):
        return [residual] * n_blocks
    if (not isinstance(residual, (list, tuple)) or len(residual) != n_blocks
            or not all(isinstance(r, bool) for r in residual)):
        raise ValueError(f"residual must be True, False or a list of {n_blocks} booleans (one per block), "
                         f"got {residual!r}.")
    return list(residual)


def _is_pair(item):
    return isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(v, int) for v in item)

