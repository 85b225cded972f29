"""Checks of the arguments that kernel makers and builders take: one place for "a positive int,
not a bool", "True or False", "one of ...", so every `make_*` refuses `k=True` (which Python
counts as 1) or `causal="yes"` (which is truthy) the same way.

Each check returns the value (ints as plain `int`: a NumPy integer is accepted and converted)
or raises `ArgumentError` naming the argument, what was expected and what was given:

    gemm: k must be a positive int, got True (a bool)

`where` prefixes the message with the maker's name ("gemm", "attention"). The phrasing
"NAME must be EXPECTED, got GIVEN" is the one the kernels' existing messages use.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from .errors import MgpuLabError

T = TypeVar("T")


class ArgumentError(MgpuLabError, TypeError, ValueError):
    """An argument of the wrong type or out of range. Both a TypeError and a ValueError: callers
    caught either before these checks were shared, and a bool for a size is both."""


def _kind(value: Any) -> str:
    """'a bool', 'an int', 'a str': the type named in a message."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def given(value: Any, *, typed: bool = False) -> str:
    """How a message shows the value: its repr, with its type where the repr hides what is wrong
    (True is an int to Python; 1 is not True to these checks)."""
    shown = repr(value)
    if len(shown) > 80:  # an array or a long list: its type says enough
        shown = shown[:77] + "..."
    return f"{shown} ({_kind(value)})" if typed or isinstance(value, bool) else shown


def fail(name: str, expected: str, value: Any, *, where: str = "", typed: bool = False) -> ArgumentError:
    """The error for `name`: '[where: ]name must be EXPECTED, got VALUE'."""
    prefix = f"{where}: " if where else ""
    return ArgumentError(f"{prefix}{name} must be {expected}, got {given(value, typed=typed)}")


def as_int(value: Any) -> int | None:
    """`value` as an int when it is an integer and not a bool (a NumPy integer counts), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def count(name: str, value: Any, *, minimum: int = 0, maximum: int | None = None, expected: str | None = None,
          where: str = "") -> int:
    """An int (not a bool) in [minimum, maximum]; `expected` words the range in the message
    (default: 'an int >= minimum' or 'an int in [minimum, maximum]')."""
    number = as_int(value)
    if expected is None:
        expected = f"an int >= {minimum}" if maximum is None else f"an int in [{minimum}, {maximum}]"
    if number is None:
        raise fail(name, expected, value, where=where, typed=True)
    if number < minimum or maximum is not None and number > maximum:
        raise fail(name, expected, value, where=where)
    return number


def size(name: str, value: Any, *, where: str = "") -> int:
    """A positive int (not a bool: `k=True` is no size)."""
    number = as_int(value)
    if number is None or number <= 0:
        raise fail(name, "a positive int", value, where=where, typed=number is None)
    return number


def shape(name: str, value: Any, length: int, *, where: str = "") -> tuple[int, ...]:
    """A tuple (or list) of `length` positive ints."""
    expected = f"a tuple of {length} positive ints"
    if not isinstance(value, (tuple, list)) or len(value) != length:
        raise fail(name, expected, value, where=where, typed=True)
    ints = [as_int(v) for v in value]
    if any(n is None or n <= 0 for n in ints):
        raise fail(name, expected, value, where=where)
    return tuple(ints)  # type: ignore[arg-type]


def flag(name: str, value: Any, *, optional: bool = False, where: str = "") -> bool | None:
    """True or False (None too when `optional`): `causal="yes"` or `profile=1` are refused."""
    if isinstance(value, bool) or optional and value is None:
        return value
    raise fail(name, "True, False or None" if optional else "True or False", value, where=where, typed=True)


def number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
           positive: bool = False, where: str = "") -> float | int:
    """A finite int or float (not a bool: `scale=True` is refused), > 0 when `positive`, in
    [minimum, maximum] when given."""
    if positive:
        expected = "a positive finite number"
    elif minimum is not None and maximum is not None:
        expected = f"a number in [{minimum:g}, {maximum:g}]"
    else:
        expected = "a finite number" + (f" >= {minimum:g}" if minimum is not None else "") + \
            (f" <= {maximum:g}" if maximum is not None else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # NumPy scalars are Reals too
        raise fail(name, expected, value, where=where, typed=True)
    if not math.isfinite(value) or positive and value <= 0 or minimum is not None and value < minimum \
            or maximum is not None and value > maximum:
        raise fail(name, expected, value, where=where)
    return value


def alternatives(options: Iterable[Any]) -> str:
    """"'a', 'b' or 'c'": options spelled out for a message."""
    shown = [repr(o) for o in options]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def choice(name: str, value: T, options: Sequence[Any], *, expected: str | None = None, where: str = "") -> T:
    """One of `options`, of the option's own type (1 is not True, 1.0 is not 1). `expected`
    describes the options in the message (default: 'one of (a, b, c)')."""
    if not any(type(value) is type(option) and value == option for option in options):
        loose = any(_equal(value, option) for option in options)  # 1 for True: say it is an int
        raise fail(name, expected or f"one of {tuple(options)!r}", value, where=where, typed=loose)
    return value


def _equal(value: Any, option: Any) -> bool:
    try:
        return bool(value == option)
    except Exception:  # noqa: BLE001 - an array compares elementwise; it is no option anyway
        return False


__all__ = ["ArgumentError", "alternatives", "as_int", "choice", "count", "fail", "flag", "given", "number", "shape", "size"]
