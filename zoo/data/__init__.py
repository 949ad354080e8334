"""Corpora, tokenizers and tf.data pipelines."""

from zoo.data.base_tokenizer import Tokenizer, register_tokenizer
from zoo.data.corpus import read_lines
from zoo.data.datasets import build_tokenizer, ptb_tokenizer
from zoo.data.pipeline import sentence_dataset, stream_dataset
from zoo.data.tokenizers import (CharTokenizer, SubwordTokenizer, WordTokenizer, load_tokenizer,
                                 normalize_subword)
from zoo.deprecation import former_name

__all__ = ["read_lines", "build_tokenizer", "ptb_tokenizer", "sentence_dataset",
           "stream_dataset", "CharTokenizer", "SubwordTokenizer",
           "WordTokenizer", "load_tokenizer", "normalize_subword", "Tokenizer", "register_tokenizer"]


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
