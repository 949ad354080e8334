"""Argument checks shared by the layers and everything built on them (one sentence per bad value).

Python's `bool` is a subclass of `int`, so `True` would pass for 1 in a plain `isinstance(x, int)`;
every integer argument of the zoo goes through `is_int` instead.
"""

import numpy as np


def plain(value):
    """`value` with numpy scalars as the Python numbers they hold, inside lists, tuples and dicts
    too, so that the checks below take them: a numpy count (`np.int64`) is a natural argument,
    Keras' layers refuse it as a size, and a config.json cannot hold it."""
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value.item() if isinstance(value, np.generic) else value


def is_int(value):
    """Whether `value` is an integer and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name, value, minimum=None, maximum=None, bounds=None):
    """`value` if it is an integer (not a bool) in `[minimum, maximum]` (either end may be None),
    else one `ValueError`: "`name` must be an integer >= minimum, got value." ("in [minimum,
    maximum]" with both ends, "<= maximum" with only the upper one). `bounds`, e.g.
    "[1, num_experts] = [1, 8]", replaces the bracket: "`name` must be an integer in `bounds`, got
    value."."""
    if is_int(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return value
    if bounds is not None:
        where = f" in {bounds}"
    elif minimum is not None and maximum is not None:
        where = f" in [{minimum}, {maximum}]"
    elif minimum is not None:
        where = f" >= {minimum}"
    elif maximum is not None:
        where = f" <= {maximum}"
    else:
        where = ""
    raise ValueError(f"{name} must be an integer{where}, got {value!r}.")


def check_number(name, value, minimum=0):
    """`value` if it is a real number (an int or a float, not a bool) >= `minimum`, else one
    `ValueError`: "`name` must be a number >= minimum, got value."."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ValueError(f"{name} must be a number >= {minimum}, got {value!r}.")
    return value


def check_rate(name, value):
    """`value` as a float if it is a rate (a dropout's), a real number (not a bool) in [0, 1),
    else one `ValueError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a rate in [0, 1), got {value!r}.")
    return float(value)
