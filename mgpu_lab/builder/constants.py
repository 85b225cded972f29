"""Whether a Python number keeps its meaning as a constant of an MLIR type.

`arith.constant` silently wraps an int to the type's width and rounds a float past the
type's largest finite value to inf, so `x + 2**40` on an i32 adds 0 and `c(1e39, "float32")`
is inf. Every constant the typed values emit goes through these checks first, and one
that would change meaning raises a ValueError naming the value, the type and its range.

Which integers an `iN` accepts depends on how the value reads it (the signedness rule of
`values.py`):
- "signed" (an `iN` value, an `intN` dtype): [-2**(N-1), 2**(N-1) - 1];
- "unsigned" (`index`, an `.unsigned` view, a `uintN` dtype): [0, 2**N - 1];
- "either" (wrap-around ops `+ - * & | ^ <<` and constants of a signless MLIR type): the
  union [-2**(N-1), 2**N - 1], because both readings give the same bits: `x & 0xFFFF0000`
  on an i32 is the mask it says, `x + 2**40` is refused.
`i1` holds 0 and 1 whatever the reading (and -1, all ones, under "either").
"""

from __future__ import annotations

import math
import numbers

from .._mlir import ir

# Largest finite value and the magnitude from which round-to-nearest-even gives inf (or,
# for f8E4M3FN which has no inf, NaN): max + half an ulp. f64 needs none: it is Python's float.
_FLOAT_LIMITS = {
    "f16": (65504.0, 65520.0),
    "bf16": ((2 - 2**-7) * 2.0**127, (2 - 2**-8) * 2.0**127),
    "f32": ((2 - 2**-23) * 2.0**127, (2 - 2**-24) * 2.0**127),
    "tf32": ((2 - 2**-10) * 2.0**127, (2 - 2**-11) * 2.0**127),
    "f8E4M3FN": (448.0, 464.0),
    "f8E5M2": (57344.0, 61440.0),
}


def int_width(t: ir.Type) -> int:
    """Bits of an integer or index type (index is 64 bits on NVPTX)."""
    return 64 if isinstance(t, ir.IndexType) else ir.IntegerType(t).width


def int_range(t: ir.Type, reading: str) -> tuple[int, int]:
    """The ints type `t` holds under `reading` ("signed", "unsigned" or "either")."""
    width = int_width(t)
    if width == 1:
        return (-1 if reading == "either" else 0), 1
    low = 0 if reading == "unsigned" else -(1 << (width - 1))
    high = (1 << (width - 1)) - 1 if reading == "signed" else (1 << width) - 1
    return low, high


def check_int_constant(value: int, t: ir.Type, reading: str, what: str) -> int:
    """`value` (an int or bool) if `t` holds it under `reading`, else a ValueError from `what`.

    A bool is refused for any type but i1: `x + True` or a shift by `True` is a slip, not a count."""
    if isinstance(value, bool) and int_width(t) != 1:
        raise TypeError(f"{what}: expected an int for the {t} operand, got the bool {value}")
    low, high = int_range(t, reading)
    if not low <= value <= high:
        raise ValueError(f"{what}: expected an int in [{low}, {high}] for {_describe(t, reading)}, got {value}"
                         f"{_power_of_two(value)}")
    return int(value)


def check_float_constant(value: float | int, t: ir.Type, what: str) -> float:
    """`value` as a float if `t` can hold it without overflowing to inf (inf and nan pass as
    themselves), else a ValueError from `what`."""
    try:
        number = float(value)
    except OverflowError:  # an int past float64's range
        number = math.inf
    if math.isnan(number) or (math.isinf(number) and not isinstance(value, numbers.Integral)):
        return number  # literally inf or nan: meant
    limits = _FLOAT_LIMITS.get(str(t))
    finite_max, rounds_to_inf = limits if limits else (1.7976931348623157e308, math.inf)
    if math.isinf(number) or abs(number) >= rounds_to_inf:
        raise ValueError(f"{what}: expected a value in [-{finite_max:g}, {finite_max:g}] (or inf/nan) for {t}, "
                         f"got {_shown(value)}, which would become {'-' if number < 0 else ''}inf")
    return number


def _shown(value: float | int) -> str:
    """The value as the user wrote it, cut short when it is a huge int."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:12]}... ({len(text)} digits)"


def _describe(t: ir.Type, reading: str) -> str:
    if reading == "either":
        return f"{t} (signed or unsigned)"
    return f"{'an' if reading == 'unsigned' else 'a'} {reading} {t}"


def _power_of_two(value: int) -> str:
    """' (2**40)' for an exact power of two, to make a big number readable."""
    magnitude = abs(value)
    if magnitude >= 1 << 16 and magnitude & (magnitude - 1) == 0:
        return f" ({'-' if value < 0 else ''}2**{magnitude.bit_length() - 1})"
    return ""
