"""The experiments of `zoo reproduce`, found in this folder: a new module here is a new experiment,
with nothing to register.

A module is an experiment when it has a `NAME` (table4); otherwise its `EXPERIMENTS` lists the
experiments it defines (objects with the same attributes, such as the training-curve experiments
of `zoo.tools.reproduce.curves`); a module whose name starts with `_` is a helper, and one whose name
ends with `_test` is an experiment's tests (`table4_test.py` beside `table4.py`): neither is read. An experiment has `NAME`, `DESCRIPTION`, `PAPER` (the figure
it reproduces), `settings(quick, repeats)`, `units(settings)`, `run(settings, pending, save, log,
done)` (`done`: the units already measured), `figures(settings, units)`, `extras(settings,
units)` and `plot(result, path)`; `TIMED_BY_MINUTES`, when true, lets `--minutes` set its budget.
"""

import functools
import importlib
import pkgutil


@functools.cache
def experiments():
    """`{name: experiment}` of every experiment in this folder, by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name.endswith("_test"):  # a helper, or an experiment's tests
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(module, "NAME") and not hasattr(module, "EXPERIMENTS"):
            raise RuntimeError(f"{module.__name__} has neither NAME nor EXPERIMENTS: an experiment module "
                               "defines one of them; name a helper module with a leading underscore.")
        for exp in [module] if hasattr(module, "NAME") else module.EXPERIMENTS:
            if exp.NAME in found:
                raise RuntimeError(f"Two experiments are named {exp.NAME!r} (one in {module.__name__}).")
            found[exp.NAME] = exp
    return dict(sorted(found.items()))


def experiment(name):
    """The experiment `name`, or a ValueError naming the known ones."""
    if name not in experiments():
        raise ValueError(f"Unknown experiment {name!r}; known experiments: {', '.join(experiments())} "
                         "(zoo reproduce --list).")
    return experiments()[name]


def list_experiments():
    """`[(name, description, paper figure)]` of every experiment."""
    return [(name, exp.DESCRIPTION, exp.PAPER) for name, exp in experiments().items()]
