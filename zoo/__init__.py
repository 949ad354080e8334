"""The zoo: gated convolutional and mixture-of-experts language models as Keras 3 models.

    import zoo
    zoo.presets()
    lm = zoo.load("gcnn-14")

Subpackages: `zoo.layers` (the Keras layers), `zoo.models` (the model families and their
presets), `zoo.data`, `zoo.training`, `zoo.export` (SavedModel export for TF Serving) and
`zoo.tools` (the `zoo` command line; with the workshop, the benchmarks and reproductions).
"""

import os as _os

# TensorFlow's C++ start-up logs (e.g. "failed call to cuInit" on a machine without a GPU) are
# noise for users of the zoo; set TF_CPP_MIN_LOG_LEVEL before importing zoo to see them.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from zoo import logs as _logs  # noqa: E402  (the zoo's log records, before anything logs)

_logs.install()

# zoo.layers, zoo.export and zoo.tools live in the repository's top-level layers/, export/ and
# tools/ folders; setup.py's package_dir maps them into this package, for `pip install .` and for
# the editable install of a source checkout alike (docs/contributing.md). Python started inside a
# checkout that is not installed editable finds this folder first and not the others: say so.
try:
    import zoo.layers  # noqa: F401
except ModuleNotFoundError as _error:
    if _error.name != "zoo.layers":
        raise
    raise ImportError(
        f"zoo is imported from the source checkout {_os.path.dirname(_os.path.dirname(__file__))}, which is "
        "not installed editable, so zoo.layers, zoo.export and zoo.tools cannot be found. Run "
        "`pip install -e .` in the checkout, or start Python from another directory."
    ) from None

from zoo.factorized_adam import FactorizedAdam  # registered for .keras loading
from zoo.models import GCNNLanguageModel, LanguageModel, StackLanguageModel, samplers
from zoo.registry import count_params, load, presets, register_presets
import zoo.convert.fairseq  # noqa: E402,F401  (zoo.load(PRESET, weights=a fairseq checkpoint))

__version__ = "0.1.0"
__all__ = ["load", "presets", "count_params", "register_presets", "GCNNLanguageModel", "StackLanguageModel", "samplers",
           "LanguageModel", "FactorizedAdam"]


def __getattr__(name):
    # `zoo.distribute` moved into zoo.training (it serves only the training loop); the old
    # attribute keeps working for one release.
    if name == "distribute":
        from zoo.deprecation import warn
        from zoo.training import distribute

        warn("zoo.distribute", "zoo.training.distribute")
        return distribute
    # the heavier subpackages load on first use, so that `import zoo` stays light while
    # `zoo.export.export_saved_model(...)` works after it alone, as `zoo.data` and `zoo.layers` do
    if name in ("export", "training"):
        import importlib

        return importlib.import_module(f"zoo.{name}")
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
