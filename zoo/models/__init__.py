"""The zoo's language models."""

from zoo.models.base import LanguageModel
from zoo.models.gcnn import GCNNLanguageModel
from zoo.models.recurrent import RecurrentLanguageModel

__all__ = ["LanguageModel", "GCNNLanguageModel", "RecurrentLanguageModel"]
