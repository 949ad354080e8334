"""Argument checks shared by the layers and everything built on them (one sentence per bad value).

Python's `bool` is a subclass of `int`, so `True` would pass for 1 in a plain `isinstance(x, int)`;
every integer argument of the zoo goes through `is_int` instead.
"""


def is_int(value):
    """Whether `value` is an integer and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name, value, minimum=None, maximum=None, bounds=None):
    """`value` if it is an integer (not a bool) in `[minimum, maximum]`, else one `ValueError`:
    "`name` must be an integer >= minimum, got value." (or "in [minimum, maximum]"; `bounds`, e.g.
    "[1, num_experts] = [1, 8]", replaces the bracket in the message)."""
    low_ok = minimum is None or (is_int(value) and value >= minimum)
    high_ok = maximum is None or (is_int(value) and value <= maximum)
    if is_int(value) and low_ok and high_ok:
        return value
    if maximum is None:
        where = f">= {minimum}" if minimum is not None else ""
    else:
        where = f"in {bounds or f'[{minimum}, {maximum}]'}"
    raise ValueError(f"{name} must be an integer{' ' + where if where else ''}, got {value!r}.")


def check_number(name, value, minimum=0):
    """`value` if it is a real number (not a bool) >= `minimum`, else one `ValueError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ValueError(f"{name} must be a number >= {minimum}, got {value!r}.")
    return value
