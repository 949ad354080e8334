"""zoo_litert, the third distribution of this repository: runs a LiteRT export of the zoo
(`zoo export --format litert`) with `ai-edge-litert`, numpy and sentencepiece, without TensorFlow
and without the zoo. From the checkout's root: `pip install ./runtime`. The library's install
(setup.py at the root) carries the same package; this one installs it alone, for a lean server
(docs/serving.md#the-python-runtime-zoo_litert)."""

from setuptools import setup

setup(
    name="gcnn-moe-zoo-litert",
    version="0.1.0",
    description="Runs LiteRT exports of gcnn-moe-zoo's language models without TensorFlow",
    python_requires=">=3.10,<3.13",
    packages=["zoo_litert"],
    package_data={"zoo_litert": ["example/*"]},  # the tiny export the docstrings' examples load
    install_requires=[
        "ai-edge-litert>=2.0,<3",
        "numpy",
        # as the library pins it: the zoo's subword ids are tensorflow-text's SentencePiece splits,
        # which 0.2.2 changed for pieces of equal score (zoo/data/tokenizers.py)
        "sentencepiece>=0.1.99,<0.2.2",
    ],
)
