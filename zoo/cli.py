"""Entry point of the `zoo` console script; the commands live in tools/ (installed as zoo.tools)."""

import importlib
import importlib.util
import os
import sys


def tools_module(name):
    """`zoo.tools.<name>`, also from a source checkout, where tools/ sits beside zoo/."""
    if "zoo.tools" not in sys.modules:
        try:
            importlib.import_module("zoo.tools")
        except ModuleNotFoundError:
            folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
            spec = importlib.util.spec_from_file_location(
                "zoo.tools", os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
            )
            module = importlib.util.module_from_spec(spec)
            sys.modules["zoo.tools"] = module
            spec.loader.exec_module(module)
    return importlib.import_module(f"zoo.tools.{name}")


def main(argv=None):
    return tools_module("cli").main(argv)


if __name__ == "__main__":
    sys.exit(main())
