"""The install claims one import name, `zoo` (and `zoo_litert`, the LiteRT runtime that must import
without TensorFlow), and maps every package folder of the checkout into it:
the library (setup.py) all but the workshop's rooms, the workshop (workshop/setup.py) those; a
checkout that is not installed says how to fix it instead of failing deep inside."""

import os
import runpy
import subprocess
import sys
import types
from unittest import mock

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


WORKSHOP_ROOMS = ("benchmarks", "reproduce", "corpora", "convert")


def read_setup(folder):
    """What FOLDER/setup.py passes to setuptools.setup (run in its folder, with setup stubbed out)."""
    captured, here = {}, os.getcwd()
    os.chdir(folder)
    try:
        with mock.patch("setuptools.setup", lambda **kwargs: captured.update(kwargs)):
            runpy.run_path("setup.py", run_name="__main__")
    finally:
        os.chdir(here)
    return types.SimpleNamespace(**captured)


@pytest.fixture(scope="module")
def distribution():
    return read_setup(ROOT)


@pytest.fixture(scope="module")
def workshop():
    return read_setup(os.path.join(ROOT, "workshop"))


def package_folders():
    """Every folder of the checkout holding an __init__.py, as the import name it installs under
    (runtime/zoo_litert as zoo_litert, the LiteRT runtime's own top-level name)."""
    names = {"zoo_litert"}
    for room in ("zoo", "layers", "export", "tools"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, room)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            if "__init__.py" in files:
                relative = os.path.relpath(folder, ROOT).replace(os.sep, ".")
                names.add(relative if room == "zoo" else f"zoo.{relative}")
    return names


def test_one_top_level_name_and_every_package_folder_installed_once(distribution, workshop):
    """`zoo`, and `zoo_litert`: the LiteRT runtime, importable without TensorFlow, so not inside
    `zoo` (whose package imports TensorFlow); runtime/setup.py installs it alone."""
    library, tools = set(distribution.packages), set(workshop.packages)
    assert {name.split(".")[0] for name in library | tools} == {"zoo", "zoo_litert"}
    assert library | tools == package_folders() and not library & tools
    assert {name.split(".")[2] for name in tools} == set(WORKSHOP_ROOMS)
    for setup_folder, dist in ((ROOT, distribution), (os.path.join(ROOT, "workshop"), workshop)):
        for name in dist.packages:  # each maps onto a real folder of the checkout
            mapped = max((p for p in dist.package_dir if name == p or name.startswith(p + ".")), key=len, default=None)
            rest = name[len(mapped) + 1:].split(".") if mapped and name != mapped else []
            folder = os.path.join(setup_folder, dist.package_dir[mapped], *rest) if mapped else os.path.join(ROOT, *name.split("."))
            assert os.path.isfile(os.path.join(folder, "__init__.py")), name


def test_the_library_does_not_require_the_workshop_s_packages(distribution, workshop):
    required = " ".join(distribution.install_requires)
    for name in ("matplotlib", "tf-models-official", "tensorflow-datasets"):
        assert name not in required
        assert any(r.startswith(name) for r in distribution.extras_require["test"]), name  # the contributor's install
    assert set(distribution.extras_require["workshop"]) < set(workshop.install_requires)


def test_editable_install_maps_the_rooms_onto_the_checkout():
    import zoo.export
    import zoo.layers
    import zoo.tools

    # realpath: the strict editable mode (docs/contributing.md) reaches the files through links
    for module, room in ((zoo.layers, "layers"), (zoo.export, "export"), (zoo.tools, "tools")):
        assert os.path.dirname(os.path.realpath(module.__file__)) == os.path.join(os.path.realpath(ROOT), room)


def test_checkout_that_is_not_installed_says_how_to_install():
    # -S: no site-packages, so no editable install: Python finds the checkout's zoo/ and nothing else.
    result = subprocess.run([sys.executable, "-S", "-c", "import zoo"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: zoo is imported from the source checkout")
    assert "pip install -e ." in last
