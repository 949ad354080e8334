"""Conventions of the library (zoo/, layers/, export/; not tests/ and not the tools): it logs and
never prints (the `zoo` command prints), so that an application decides where its lines go; and
each function does one job, in at most 50 lines besides its docstring; and only zoo/compat.py
reaches Keras' internals."""

import ast
import os
import re

import pytest

from tests.library_source import LIMIT, library_modules, long_functions

# the Keras internals that zoo/compat.py shims: no other library module may reach them
KERAS_INTERNALS = re.compile(r"\._(flatten_layers|tracker|untrack_variable|trainable_variables|non_trainable_variables|"
                             r"get_variable_index|model_variables_moving_average|all_reduce_sum_gradients|losses)\b"
                             r"|\bkeras\.src\b")


def test_the_library_logs_and_never_prints():
    printing = [f"{path}:{node.lineno}" for path, text in library_modules() for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
                or isinstance(node, ast.keyword) and isinstance(node.value, ast.Name) and node.value.id == "print"]
    assert not printing, printing


def test_no_library_function_is_longer_than_50_lines_without_its_docstring():
    assert not long_functions(), f"over {LIMIT} lines: {long_functions()}"


def test_no_library_module_but_zoo_compat_reaches_the_keras_internals_it_shims():
    found = [f"{path}:{i}" for path, text in library_modules() if path != os.path.join("zoo", "compat.py")
             for i, line in enumerate(text.splitlines(), 1) if KERAS_INTERNALS.search(line.split("#")[0])]
    assert not found, found


@pytest.mark.ci  # fresh Python processes (10 s)
def test_unconfigured_the_zoo_s_records_go_where_it_printed_them_and_to_the_application_s_handlers_after(tmp_path):
    """Progress on stdout and notices on stderr, as before the library logged; with logging set up,
    only the application's handlers receive them."""
    import subprocess
    import sys

    code = """
import logging, zoo
logging.getLogger("zoo.training.trainer").info("progress line")
logging.getLogger("zoo.weights").warning("a notice")
logging.basicConfig(format="app: %(name)s %(message)s", level="INFO")
logging.getLogger("zoo.training.trainer").info("after basicConfig")
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "progress line\n"
    assert result.stderr.splitlines()[-2:] == ["a notice", "app: zoo.training.trainer after basicConfig"]
