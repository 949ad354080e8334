"""The zoo's workshop, the second distribution of this repository: the benchmarks (`zoo benchmark`),
the reproductions (`zoo reproduce`), the corpus builders (`python -m zoo.tools.corpora`) and the
fairseq golden-file tools, from the checkout's tools/ folder, installed as zoo.tools.* beside the
library: `pip install . ./workshop` from the checkout's root. A source checkout installed editable
has this code already (`pip install -e '.[workshop]'` adds its dependencies); see
docs/contributing.md#the-workshop."""

import os

from setuptools import find_packages, setup

TOOLS = os.path.join(os.pardir, "tools")
ROOMS = ("benchmarks", "reproduce", "corpora", "convert")
PACKAGES = [f"zoo.tools.{package}" for room in ROOMS
            for package in find_packages(where=TOOLS, include=[room, f"{room}.*"])]

setup(
    name="gcnn-moe-zoo-workshop",
    version="0.1.0",
    description="The benchmarks, reproductions and corpus builders of gcnn-moe-zoo",
    python_requires=">=3.10,<3.13",
    packages=PACKAGES,
    package_dir={f"zoo.tools.{room}": os.path.join(TOOLS, room) for room in ROOMS},
    package_data={"zoo.tools.reproduce": ["*.sh"]},  # the GPU recipe
    # the same pins as the library's `workshop` extra (setup.py at the root)
    install_requires=["gcnn-moe-zoo==0.1.0", "matplotlib", "tf-models-official~=2.20.0"],
)
