"""Former names kept for one release: using one warns (`DeprecationWarning`) naming its new
spelling, and then does what the new one does.

A module lists its former names in a dict and hands its `__getattr__` to `former_name`:

    DEPRECATED = {"Vocabulary": ("zoo.data.WordTokenizer", WordTokenizer)}

    def __getattr__(name):
        return former_name(__name__, name, DEPRECATED)
"""

import warnings


def warn(old, new, stacklevel=3):
    """Warns that `old` is deprecated in favour of `new` (both as the user writes them); the
    default `stacklevel` names the caller of the function that calls this."""
    warnings.warn(f"{old} is deprecated; use {new}.", DeprecationWarning, stacklevel=stacklevel)


def former_name(module, name, table):
    """The object that the former name `name` of `module` stands for, after a
    `DeprecationWarning` naming the new spelling (`table[name] = (new spelling, object)`); any
    other name raises `AttributeError` as a module does."""
    if name not in table:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new, value = table[name]
    warn(f"{module}.{name}", new, stacklevel=4)
    return value
