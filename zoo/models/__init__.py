"""The zoo's model families and their presets.

Every module of this package is imported here (tests excepted): a model family is one module
defining a `LanguageModel` subclass (which registers it), and its presets one module calling
`zoo.registry.register_presets`. So a new family is a new file and its presets, and nothing else.
`base`, `inference` and `generation` hold what every family shares; `samplers` (also `zoo.samplers`)
how `generate` chooses tokens.
"""

import importlib
import pkgutil

from zoo.models.base import LanguageModel

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _module.endswith("_test"):
        importlib.import_module(f"{__name__}.{_module}")

from zoo.models.gcnn import GCNNLanguageModel  # noqa: E402
from zoo.models.stack import StackLanguageModel  # noqa: E402

__all__ = ["LanguageModel", "GCNNLanguageModel", "StackLanguageModel"]
