"""The lengths of the library's functions (zoo/, layers/, export/; not tests and not tools/), as
issue 53's item 6 counts them: the lines of the body after the docstring, comments and blank
lines within it included. `python -m tests.function_length` lists those over LIMIT."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("zoo", "layers", "export")
LIMIT = 50


def body_lines(node):
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


def long_functions(limit=LIMIT):
    found = []
    for room in LIBRARY:
        for folder, dirs, files in os.walk(os.path.join(ROOT, room)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__")) and d != "testdata"]
            for name in sorted(files):
                if not name.endswith(".py") or name.endswith("_test.py") or name == "conftest.py":
                    continue
                path = os.path.join(folder, name)
                with open(path) as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body_lines(node) > limit:
                        found.append((os.path.relpath(path, ROOT), node.name, body_lines(node)))
    return sorted(found, key=lambda f: -f[2])


if __name__ == "__main__":
    for path, name, lines in long_functions():
        print(f"{lines:4d}  {path}  {name}")
