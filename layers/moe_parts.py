"""What the built-in parts of a mixture of experts (`moe_router.NoisyTopKRouter`,
`moe_experts.FeedForwardExperts`) do differently once a `zoo.layers.SparseMoE` holds them.

A held part leaves the saving of its variables to the mixture, which writes the variables of all
its held parts as one list in the order the layer held them before its parts were layers
(`SparseMoE.save_own_variables`): `.weights.h5` files and preset directories written before still
load, and new ones load in older releases. A part not held (used alone, or a router or experts
layer from outside the package) saves its own, as any Keras layer does.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import numpy as np


class MixturePart:
    """Mixin of the built-in parts; `SparseMoE` calls `hold` on the ones it composes."""

    _held = False
    _owner_name = None

    def hold(self, owner_name: str) -> None:
        """Leaves the saving of this part's variables to the mixture named `owner_name`."""
        # not layer state: Keras need not track them
        object.__setattr__(self, "_held", True)
        object.__setattr__(self, "_owner_name", owner_name)

    @property
    def held(self) -> bool:
        return self._held

    @property
    def display_name(self) -> str:
        """The name an error message gives: the mixture's, for a held part."""
        return self._owner_name or self.name

    def save_own_variables(self, store: MutableMapping[str, np.ndarray]) -> None:
        if not self._held:
            super().save_own_variables(store)

    def load_own_variables(self, store: Mapping[str, np.ndarray]) -> None:
        if not self._held:
            super().load_own_variables(store)
