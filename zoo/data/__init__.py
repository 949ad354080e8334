"""Corpora, vocabularies and tf.data pipelines."""

from zoo.data.corpus import read_lines
from zoo.data.datasets import build_vocabulary, ptb_vocabulary
from zoo.data.pipeline import sentence_dataset, stream_dataset
from zoo.data.tokenizers import (CharTokenizer, SubwordTokenizer, WordTokenizer, load_tokenizer,
                                 normalize_subword)
from zoo.data.vocab import CharacterVocabulary, Vocabulary

__all__ = ["read_lines", "build_vocabulary", "ptb_vocabulary", "sentence_dataset",
           "stream_dataset", "CharacterVocabulary", "Vocabulary", "CharTokenizer", "SubwordTokenizer",
           "WordTokenizer", "load_tokenizer", "normalize_subword"]
