"""The zoo: gated convolutional and mixture-of-experts language models as Keras 3 models.

    import zoo
    zoo.presets()
    lm = zoo.load("gcnn-14")

Subpackages: `zoo.layers` (the Keras layers), `zoo.models` (the model families and their
presets), `zoo.data`, `zoo.training`, `zoo.export` (SavedModel export for TF Serving) and
`zoo.tools` (the `zoo` command line and the benchmarks).
"""

import importlib.abc
import importlib.util
import os as _os
import sys as _sys

# TensorFlow's C++ start-up logs (e.g. "failed call to cuInit" on a machine without a GPU) are
# noise for users of the zoo; set TF_CPP_MIN_LOG_LEVEL before importing zoo to see them.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The repository keeps layers/, export/ and tools/ beside zoo/, and `pip install` puts them inside
# it (setup.py's package_dir). In a source checkout (the tests run there) the same names resolve
# to the sibling folders, so every import path is the installed one.
_CHECKOUT_SUBPACKAGES = ("layers", "export", "tools")


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != __name__ or name not in _CHECKOUT_SUBPACKAGES:
            return None
        folder = _os.path.join(self.root, name)
        return importlib.util.spec_from_file_location(
            fullname, _os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


def _install_checkout_finder():
    here = _os.path.dirname(_os.path.abspath(__file__))
    root = _os.path.dirname(here)
    installed = all(_os.path.isdir(_os.path.join(here, name)) for name in _CHECKOUT_SUBPACKAGES)
    checkout = all(_os.path.isfile(_os.path.join(root, name, "__init__.py")) for name in _CHECKOUT_SUBPACKAGES)
    if checkout and not installed and not any(isinstance(f, _CheckoutFinder) for f in _sys.meta_path):
        _sys.meta_path.append(_CheckoutFinder(root))


_install_checkout_finder()

from zoo.factorized_adam import FactorizedAdam  # noqa: E402  (registered for .keras loading)
from zoo.models import GCNNLanguageModel, LanguageModel, RecurrentLanguageModel, StackLanguageModel  # noqa: E402
from zoo.registry import count_params, load, presets, register_presets  # noqa: E402

__version__ = "0.1.0"
__all__ = ["load", "presets", "count_params", "register_presets", "GCNNLanguageModel", "RecurrentLanguageModel", "StackLanguageModel",
           "LanguageModel", "FactorizedAdam"]
