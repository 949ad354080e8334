"""The library's source (zoo/, layers/, export/, runtime/zoo_litert/; not tests, not conftest, not tools/), for the
checks of tests/library_conventions_test.py, and the lengths of its functions as issue 53's item 6
counts them: the lines of the body after the docstring, comments and blank lines within it
included. `python -m tests.library_source` lists the functions over LIMIT."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("zoo", "layers", "export", os.path.join("runtime", "zoo_litert"))  # the last installs as zoo_litert
LIMIT = 50


def library_modules():
    """`(path relative to the checkout, source text)` of every library module."""
    for room in LIBRARY:
        for folder, dirs, files in os.walk(os.path.join(ROOT, room)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")) and d != "testdata")
            for name in sorted(files):
                if name.endswith(".py") and not name.endswith("_test.py") and name != "conftest.py":
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, ROOT), f.read()


def body_lines(node):
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


def long_functions(limit=LIMIT):
    """`(path, function name, lines)` of every library function over `limit` lines, longest first."""
    found = [(path, node.name, body_lines(node)) for path, text in library_modules() for node in ast.walk(ast.parse(text))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body_lines(node) > limit]
    return sorted(found, key=lambda f: -f[2])


if __name__ == "__main__":
    for path, name, lines in long_functions():
        print(f"{lines:4d}  {path}  {name}")
