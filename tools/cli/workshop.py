"""The workshop behind `zoo benchmark` and `zoo reproduce`: zoo.tools.benchmarks, .reproduce,
.corpora and .convert are not part of the library's install (`pip install .` leaves them out; the
second distribution, workshop/, installs them), and they need packages the library does not
(matplotlib, tf-models-official). `room` imports one of them, or says in one sentence what to
install."""

import importlib

INSTALL = ("pip install -e '.[workshop]' in a source checkout of the zoo (or, beside a non-editable pip install . "
           "of it, pip install ./workshop from the checkout)")
# the import names of the workshop's own dependencies -> the distribution that brings each
DEPENDENCIES = {"matplotlib": "matplotlib", "official": "tf-models-official"}


class WorkshopNotInstalled(ModuleNotFoundError):
    """A verb of the workshop was asked for where the workshop (or one of its dependencies) is not installed."""


def _imported(names, verb):
    """The modules `names`, imported in order, or WorkshopNotInstalled when one of them is itself
    missing (a module missing inside one of them is another fault, raised as it is)."""
    try:
        return [importlib.import_module(name) for name in names]
    except ModuleNotFoundError as e:
        if e.name not in names:
            raise
        missing = f"its {DEPENDENCIES[e.name]}" if e.name in DEPENDENCIES else "its code"
        raise WorkshopNotInstalled(f"`{verb}` is part of the zoo's workshop, not installed here ({missing} is "
                                   f"missing): {INSTALL}.", name=e.name) from None


def room(name, verb, needs=()):
    """zoo.tools.NAME, imported with the dependencies `needs` (import names of DEPENDENCIES), or
    WorkshopNotInstalled naming what is missing and how to install it."""
    return _imported([f"zoo.tools.{name}", *needs], verb)[0]


def dependency(import_name, verb):
    """The workshop's dependency `import_name` (a key of DEPENDENCIES), or WorkshopNotInstalled."""
    return _imported([import_name], verb)[0]
