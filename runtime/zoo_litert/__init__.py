"""zoo_litert: run a LiteRT export of the zoo (`zoo export --format litert`) without TensorFlow,
with `ai_edge_litert`'s interpreter, numpy and (for a subword model) `sentencepiece`.

    import zoo_litert
    model = zoo_litert.load("exports/gcnn-ptb/litert")
    model.score(["the company said it would buy the stock"])       # as lm.score
    model.generate("the company said", max_new_tokens=20, sampler="top_p", top_p=0.9, seed=0)

It imports neither TensorFlow nor the zoo: `pip install ./runtime` from a checkout installs it
alone (the library's install carries it too). `EXAMPLE` is a tiny export shipped with the package
(a GCNN of 15 words trained on a few sentences), for trying it and for the docstrings' examples.
"""

import os

from zoo_litert.model import LiteRTModel, load
from zoo_litert.sampling import Sampling
from zoo_litert.tokenizers import CharTokenizer, SubwordTokenizer, WordTokenizer, load_tokenizer

__version__ = "0.1.0"
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "example")

__all__ = ["load", "LiteRTModel", "Sampling", "load_tokenizer", "WordTokenizer", "CharTokenizer", "SubwordTokenizer",
           "EXAMPLE"]
