"""The zoo: gated convolutional and mixture-of-experts language models as Keras 3 models.

    import zoo
    zoo.presets()
    lm = zoo.load("gcnn-14")
"""

import os as _os

# TensorFlow's C++ start-up logs (e.g. "failed call to cuInit" on a machine without a GPU) are
# noise for users of the zoo; set TF_CPP_MIN_LOG_LEVEL before importing zoo to see them.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from zoo.factorized_adam import FactorizedAdam  # noqa: E402  (registered for .keras loading)
from zoo.models import GCNNLanguageModel, LanguageModel, RecurrentLanguageModel  # noqa: E402
from zoo.models.stack import StackLanguageModel  # noqa: E402
from zoo.registry import load, presets  # noqa: E402

__version__ = "0.1.0"
__all__ = ["load", "presets", "GCNNLanguageModel", "RecurrentLanguageModel", "StackLanguageModel",
           "LanguageModel", "FactorizedAdam"]
