"""Conventions of the library (zoo/, layers/, export/; not tests/ and not the tools): it logs and
never prints (the `zoo` command prints), so that an application decides where its lines go; and
each function does one job, in at most 50 lines besides its docstring."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("zoo", "layers", "export")


def library_modules():
    for room in LIBRARY:
        for folder, dirs, files in os.walk(os.path.join(ROOT, room)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__")) and d != "testdata"]
            for name in sorted(files):
                if name.endswith(".py") and not name.endswith("_test.py") and name != "conftest.py":
                    path = os.path.join(folder, name)
                    with open(path) as f:
                        yield os.path.relpath(path, ROOT), ast.parse(f.read())


def test_the_library_logs_and_never_prints():
    printing = [f"{path}:{node.lineno}" for path, tree in library_modules() for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
                or isinstance(node, ast.keyword) and isinstance(node.value, ast.Name) and node.value.id == "print"]
    assert not printing, printing


def test_no_library_function_is_longer_than_50_lines_without_its_docstring():
    from tests.function_length import LIMIT, long_functions

    assert not long_functions(), f"over {LIMIT} lines: {long_functions()}"


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
