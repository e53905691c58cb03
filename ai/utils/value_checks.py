"""The checks a configuration value goes through, each marked with what it accepts.

A check takes a value and raises ``ValueError`` saying what it must be; it checks the
value's type before its range, so a value of the wrong type is a refusal, never a
``TypeError``. ``ai.config`` builds every attribute's check from these, and so does the
context system for its overrides (``ai.prompt_contexts``): both import this module, which
imports nothing of ours.
"""


class ConfigError(ValueError):
    """A configuration value was refused; the message names the attribute and its range."""


def accepts(kind, allowed):
    """Return a decorator recording on a check what it accepts, for builders and for ``Option``.

    Args:
        kind (type): The type of value the check takes (bool, int, float, str, list or dict);
            ``Option.read`` reads a builder's text by it.
        allowed (str): What the check allows, such as ``"a number in (0, 1]"``.
    """

    def mark(check):
        check.kind, check.allowed = kind, allowed
        return check

    return mark


def is_number(value):
    """Return whether ``value`` is a number (True and False are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value):
    """Return whether ``value`` is a whole number (True and False are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def refusal(check, value):
    """Return the ValueError refusing ``value``: what ``check`` allows and, for text where a
    number or True/False belongs (``"0.7"``), how to write it."""
    if isinstance(value, str) and check.kind in (int, float, bool):
        return ValueError(f"must be {check.allowed}, not text: write it without quotes")
    return ValueError(f"must be {check.allowed}")


@accepts(float, "a number in (0, 1]")
def fraction(value):
    """Accept a number in (0, 1]."""
    if not (is_number(value) and 0 < value <= 1):
        raise refusal(fraction, value)


@accepts(bool, "True or False")
def boolean(value):
    """Accept True or False."""
    if not isinstance(value, bool):
        raise refusal(boolean, value)


def int_range(low, high=None):
    """Return a check accepting whole numbers from ``low`` to ``high`` (no upper bound if None)."""
    bound = f"from {low:,} to {high:,}" if high is not None else f"of at least {low:,}"

    @accepts(int, f"a whole number {bound}")
    def check(value):
        if not is_int(value) or value < low or (high is not None and value > high):
            raise refusal(check, value)

    return check


def optional(check):
    """Return a check that also accepts None (``check`` is marked with ``accepts``)."""

    @accepts(check.kind, f"None or {check.allowed}")
    def check_optional(value):
        if value is not None:
            check(value)

    return check_optional


def one_of(*choices):
    """Return a check accepting one of the strings ``choices``."""

    @accepts(str, "one of " + ", ".join(map(repr, choices)))
    def check(value):
        if value not in choices:
            raise ValueError(f"must be {check.allowed}")

    return check


@accepts(str, "a non-empty string")
def text(value):
    """Accept a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be {text.allowed}")


def number_range(low, high, low_open=False):
    """Return a check accepting numbers from ``low`` to ``high`` (``low`` excluded if open)."""
    bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"

    @accepts(float, f"a number in {bound}")
    def check(value):
        if not is_number(value):
            raise refusal(check, value)
        if not (value > low if low_open else value >= low) or value > high:
            raise ValueError(f"must be {check.allowed}")

    return check


def check_named(name, value, check):
    """Run ``check`` on ``value``; a refusal becomes a ConfigError naming ``name``.

    Raises:
        ConfigError: naming ``name``, the value and what is allowed (a check that raises
            ConfigError names the attribute itself and is passed on as it is).
    """
    try:
        check(value)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{name}={value!r} refused: {err}") from err
