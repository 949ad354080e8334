"""The zoo's modules import one another without circles.

Every module of zoo/, layers/, export/ and tools/ is parsed (not imported) under the name it is
installed as (`zoo.*`, `zoo.layers.*`, `zoo.export.*`, `zoo.tools.*`; tests left out), and every
import it writes is an edge, those inside functions included: a function-level import that only
dodges a circle at import time is still a circle in the design.

An edge goes to the module an import names: `import zoo.data.vocab` and `from zoo.data import
vocab` go to `zoo.data.vocab`; `from zoo.data import read_lines` goes to the package `zoo.data`
(its `__init__` runs to give the name). Python also runs the parent packages of a module it
imports; those are not edges (every module would otherwise depend on `zoo/__init__.py`, which
imports the public API).

The layers the edges must respect, lowest first: the leaves `zoo.compat` (the shims over TF/Keras
internals), `zoo.deprecation` (the former names and their warning) and `zoo.logs`, which import nothing of the
zoo → layers → the core (data, models, training, the registry,
weights) → export → tools (with `zoo.__main__`, `python -m zoo`, the command line's other door);
nothing imports upwards.
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# repository folder -> the installed package name it becomes (setup.py's package_dir)
FOLDERS = {"zoo": "zoo", "layers": "zoo.layers", "export": "zoo.export", "tools": "zoo.tools"}


def module_files():
    """`{module name: path}` of every non-test module of the four folders."""
    modules = {}
    for folder, package in FOLDERS.items():
        base = os.path.join(ROOT, folder)
        for directory, subdirectories, files in os.walk(base):
            subdirectories[:] = sorted(d for d in subdirectories if not d.startswith((".", "__")))
            relative = os.path.relpath(directory, base)
            parts = [package] + ([] if relative == "." else relative.split(os.sep))
            for name in files:
                if not name.endswith(".py") or name.endswith("_test.py") or name.startswith("test_"):
                    continue
                module = ".".join(parts if name == "__init__.py" else parts + [name[:-3]])
                modules[module] = os.path.join(directory, name)
    return modules


def _absolute(node, module, is_package):
    """The module an `ImportFrom` node starts from, relative imports resolved."""
    if not node.level:
        return node.module
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module, path, modules):
    """The project modules `module` (at `path`) imports anywhere in its body, with line numbers."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    is_package = os.path.basename(path) == "__init__.py"
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    edges.append((name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if not source:
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if target in modules:
                    edges.append((target, node.lineno))
                    continue
                name = source
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    edges.append((name, node.lineno))
    return [(target, line) for target, line in edges if target != module]


def import_graph():
    modules = module_files()
    return {module: imports_of(module, path, modules) for module, path in modules.items()}, modules


def find_cycle(graph):
    """One cycle of `graph` (`{node: [(node, line), ...]}`) as a list of nodes, or None."""
    state = {}  # node -> 1 on the current path, 2 done
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for target, _ in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def knots(graph):
    """The sets of modules that import one another round (the strongly connected components of
    more than one module), each as `(members, one cycle through them)`."""
    reach = {}

    def reachable(node):
        if node not in reach:
            seen, todo = set(), [node]
            while todo:
                for target, _ in graph.get(todo.pop(), ()):
                    if target not in seen:
                        seen.add(target)
                        todo.append(target)
            reach[node] = seen
        return reach[node]

    found, placed = [], set()
    for node in sorted(graph):
        if node in placed or node not in reachable(node):
            continue
        members = sorted(m for m in reachable(node) if node in reachable(m))
        placed.update(members)
        inside = {m: [(t, line) for t, line in graph[m] if t in members] for m in members}
        found.append((members, find_cycle(inside)))
    return found


def describe(cycle, graph, modules):
    lines = []
    for a, b in zip(cycle, cycle[1:]):
        where = sorted(line for target, line in graph[a] if target == b)
        lines.append(f"  {a} imports {b} ({os.path.relpath(modules[a], ROOT)}:{where[0]})")
    return "\n".join(lines)


def layer_of(module):
    """-1 the leaves (compat, deprecation), 0 layers, 1 the core, 2 export, 3 tools."""
    if module in ("zoo.compat", "zoo.deprecation", "zoo.logs"):
        return -1
    if module == "zoo.__main__":
        return 3
    for prefix, rank in (("zoo.layers", 0), ("zoo.export", 2), ("zoo.tools", 3)):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return 1


def test_the_module_graph_has_no_cycle():
    graph, modules = import_graph()
    assert len(modules) > 40 and "zoo.models.base" in modules and "zoo.layers.sparse_moe" in modules
    circles = [f"{', '.join(members)} import one another, e.g.\n{describe(cycle, graph, modules)}"
               for members, cycle in knots(graph)]
    assert not circles, "Import circles:\n" + "\n\n".join(circles)


def test_imports_point_down_the_layers():
    graph, modules = import_graph()
    upward = [f"{os.path.relpath(modules[a], ROOT)}:{line} {a} imports {b}"
              for a in sorted(graph) for b, line in graph[a]
              if layer_of(b) > layer_of(a)]
    assert not upward, "Imports that point up the layers (layers → core → export → tools):\n" + "\n".join(upward)


def test_the_checker_sees_function_level_imports_and_finds_a_cycle(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("import os\n\ndef f():\n    from pkg import b\n")
    b = tmp_path / "b.py"
    b.write_text("from pkg.a import f\n")
    modules = {"pkg.a": str(a), "pkg.b": str(b), "pkg": str(tmp_path / "__init__.py")}
    graph = {m: imports_of(m, p, modules) for m, p in modules.items() if m != "pkg"}
    assert graph == {"pkg.a": [("pkg.b", 4)], "pkg.b": [("pkg.a", 1)]}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert find_cycle({"pkg.a": [("pkg.b", 4)], "pkg.b": []}) is None
    two = {"a": [("b", 1)], "b": [("a", 1), ("c", 2)], "c": [("b", 1)], "d": [("e", 1)], "e": [("d", 1)],
           "f": [("a", 1)]}
    assert knots(two) == [(["a", "b", "c"], ["a", "b", "a"]), (["d", "e"], ["d", "e", "d"])]

