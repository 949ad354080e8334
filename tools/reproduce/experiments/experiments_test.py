"""The experiments' discovery (this package's `__init__.py`): every module of the folder is an
experiment except helpers (`_name.py`) and test files (`name_test.py`), which are never imported."""

import importlib
import sys

import pytest

# the package itself (zoo.tools.reproduce re-exports its function `experiments` under the same name)
package = importlib.import_module("zoo.tools.reproduce.experiments")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An experiments folder of its own: `package.experiments()` reads it, uncached."""
    monkeypatch.setattr(package, "__path__", [str(tmp_path)])
    for name in ("zz_fake", "zz_fake_test", "_zz_helper"):
        monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)
    return tmp_path


def test_test_files_and_helpers_beside_the_experiments_are_not_read(folder):
    (folder / "zz_fake.py").write_text("NAME = 'zz-fake'\nDESCRIPTION = 'd'\nPAPER = 'p'\n")
    # neither NAME nor EXPERIMENTS, and importing either would fail: they must not be imported
    (folder / "zz_fake_test.py").write_text("raise AssertionError('a test file was imported')\n")
    (folder / "_zz_helper.py").write_text("raise AssertionError('a helper was imported')\n")
    assert list(package.experiments.__wrapped__()) == ["zz-fake"]


def test_a_module_without_name_or_experiments_is_refused_by_name(folder):
    (folder / "zz_fake.py").write_text("X = 1\n")
    with pytest.raises(RuntimeError, match=r"zz_fake has neither NAME nor EXPERIMENTS"):
        package.experiments.__wrapped__()


def test_the_shipped_experiments_come_from_experiment_modules_only():
    modules = {getattr(e, "__module__", None) or e.__name__ for e in package.experiments().values()}
    assert modules and not any(m.endswith("_test") for m in modules)
    assert "table4" in package.experiments()
