"""The install claims one import name, `zoo`, and maps every package folder of the checkout into it
(setup.py); a checkout that is not installed says how to fix it instead of failing deep inside."""

import os
import runpy
import subprocess
import sys
import types
from unittest import mock

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def distribution():
    """What setup.py passes to setuptools.setup (read by running setup.py with setup stubbed out)."""
    captured = {}
    with mock.patch("setuptools.setup", lambda **kwargs: captured.update(kwargs)):
        runpy.run_path(os.path.join(ROOT, "setup.py"), run_name="__main__")
    return types.SimpleNamespace(packages=captured["packages"], package_dir=captured["package_dir"])


def package_folders():
    """Every folder of the checkout holding an __init__.py, as the import name it installs under."""
    names = set()
    for room in ("zoo", "layers", "export", "tools"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, room)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            if "__init__.py" in files:
                relative = os.path.relpath(folder, ROOT).replace(os.sep, ".")
                names.add(relative if room == "zoo" else f"zoo.{relative}")
    return names


def test_one_top_level_name_and_every_package_folder_installed(distribution):
    assert {name.split(".")[0] for name in distribution.packages} == {"zoo"}
    assert set(distribution.packages) == package_folders()
    for name in distribution.packages:  # each maps onto a real folder of the checkout
        parts = name.split(".")
        room = distribution.package_dir.get(".".join(parts[:2]))
        folder = os.path.join(ROOT, room, *parts[2:]) if room else os.path.join(ROOT, *parts)
        assert os.path.isfile(os.path.join(folder, "__init__.py")), name


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
